// Tells when a MemcachedStore's server stops answering and when it answers again, per server.

import type { EventEmitter } from 'node:events'
import { isNoAnswer } from './protocol.js'

/** Events a MemcachedStore emits (besides what its limiter reports per decision), as RedisStore's. */
export interface MemcachedStoreEvents {
  /**
   * A server did not answer a decision (connection refused or lost, or memjs's timeout). Emitted
   * once per outage of a server. `shard` is the server (`host:port`) as `shardOf` names it, or `''`
   * for a store over a memjs client of your own (which places keys itself: the store is one shard).
   * Decisions of its keys meanwhile fail, and the limiter answers them with its `onStoreError` mode.
   */
  unavailable: [error: Error, shard: string]
  /** `shard` answered a decision again after an outage. */
  available: [shard: string]
  /**
   * `setServers` changed the list: decisions go to `servers` from now on. A server that left while in
   * an outage is forgotten without 'available' (it is not asked again).
   */
  servers: [servers: readonly string[]]
}

/**
 * The servers in an outage now: one failed request without an answer starts one, the next
 * answered request of the same server ends it. Holds at most one name per server.
 */
export class ShardOutages {
  private readonly down = new Set<string>()

  constructor(private readonly events: EventEmitter<MemcachedStoreEvents>) {}

  /** True while some server is in an outage (the store then names the shard of each answer). */
  get any(): boolean {
    return this.down.size > 0
  }

  /** A request of `shard` failed: an outage starts when no server answered it. */
  failed(shard: string, error: unknown): void {
    if (!isNoAnswer(error) || this.down.has(shard)) return
    this.down.add(shard)
    this.events.emit('unavailable', error as Error, shard)
  }

  /** Forgets the outages of servers no longer in `current` (the list changed). */
  forget(current: ReadonlySet<string>): void {
    for (const shard of this.down) if (!current.has(shard)) this.down.delete(shard)
  }

  /** A request of `shard` was answered: its outage, if any, ends. */
  answered(shard: string): void {
    if (this.down.delete(shard)) this.events.emit('available', shard)
  }
}
