// One circuit breaker per shard of the store, so that a dead memcached server or Cluster master
// sends only its own keys to the failure mode while the healthy shards keep deciding.

import { CircuitBreaker } from './circuit-breaker.js'

/** The shard name of a store that is not split into shards (and of shards past the bound). */
export const WHOLE_STORE = ''

/**
 * Most shards followed at once. Real stores have a handful (servers, masters); the bound only keeps
 * a store whose `shardOf` answers something new for every key from growing the map without end.
 */
export const MAX_SHARDS = 256

/**
 * The breakers by shard, made on first use. Past MAX_SHARDS a new shard takes the place of a closed
 * breaker with no failures (it holds nothing worth keeping); when every place holds one that is
 * open or failing, the new shard shares the whole store's breaker.
 */
export class ShardBreakers {
  /** The breaker of WHOLE_STORE: the only one of a store without shards. */
  readonly whole: CircuitBreaker
  private readonly byShard = new Map<string, CircuitBreaker>()

  constructor(
    private readonly failures: number,
    readonly cooldownMs: number,
    private readonly maxShards = MAX_SHARDS,
  ) {
    this.whole = new CircuitBreaker(failures, cooldownMs)
  }

  /** The breaker of `shard`, made closed on first use. */
  of(shard: string): CircuitBreaker {
    if (shard === WHOLE_STORE) return this.whole
    const breaker = this.byShard.get(shard)
    if (breaker !== undefined) return breaker
    if (this.byShard.size >= this.maxShards && !this.evictIdle()) return this.whole
    const made = new CircuitBreaker(this.failures, this.cooldownMs)
    this.byShard.set(shard, made)
    return made
  }

  /** The name `of(shard)` reports events under: WHOLE_STORE for a shard that shares its breaker. */
  nameOf(shard: string, breaker: CircuitBreaker): string {
    return breaker === this.whole ? WHOLE_STORE : shard
  }

  /** The shards whose breaker is open now (WHOLE_STORE first when its own is). */
  openShards(): string[] {
    const open = this.whole.isOpen ? [WHOLE_STORE] : []
    for (const [shard, breaker] of this.byShard) if (breaker.isOpen) open.push(shard)
    return open
  }

  /** True when any breaker is open. */
  get anyOpen(): boolean {
    if (this.whole.isOpen) return true
    for (const breaker of this.byShard.values()) if (breaker.isOpen) return true
    return false
  }

  /** The store says `shard` may answer again (WHOLE_STORE: all of it): its open breakers probe at once. */
  probeNow(shard: string): void {
    if (shard !== WHOLE_STORE) {
      this.byShard.get(shard)?.probeNow()
      return
    }
    this.whole.probeNow()
    for (const breaker of this.byShard.values()) breaker.probeNow()
  }

  /**
   * Forgets the breakers of shards that no longer hold keys (not in `current`), and answers those
   * that were open: no call reaches them to close them, and their keys now live on another shard.
   */
  retire(current: readonly string[]): string[] {
    const keep = new Set(current)
    const retired: string[] = []
    // The whole store's breaker of a sharded store opened while it could not tell shards apart (a
    // Cluster whose slot map was not read yet): its keys now go to their shards' breakers.
    if (!keep.has(WHOLE_STORE) && this.whole.isOpen) {
      this.whole.recordSuccess()
      retired.push(WHOLE_STORE)
    }
    for (const [shard, breaker] of this.byShard) {
      if (keep.has(shard)) continue
      this.byShard.delete(shard)
      // Closed as it goes: a call still in flight with it must not announce it closed again.
      if (breaker.isOpen) {
        breaker.recordSuccess()
        retired.push(shard)
      }
    }
    return retired
  }

  // Drops one closed breaker without a failure streak; false when there is none.
  private evictIdle(): boolean {
    for (const [shard, breaker] of this.byShard) {
      if (!breaker.isOpen && breaker.streak === 0) {
        this.byShard.delete(shard)
        return true
      }
    }
    return false
  }
}
