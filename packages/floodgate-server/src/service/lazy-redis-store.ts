// The service's Redis store, made on first use; linked to peer regions by a RegionSync when --region is set.

import type { LeaseStore, Store } from 'floodgate'
import type { RegionSync, RegionSyncStatus } from 'floodgate/redis'
import type { RegionSettings } from './settings.js'
import { connectionErrorReport, type RedisConnectOptions } from './redis-connection.js'
import { withSteadyTls } from './redis-tls-streams.js'

type Connected = LeaseStore & { connected: boolean }

/**
 * A RedisStore created on first use: `import('floodgate/redis')` is asynchronous, and the limiter
 * needs its store at construction. With regions, decisions go through the RegionSync's store
 * (regional limits, usage counted) and the sync loop runs until `close()`.
 */
export class LazyRedisStore implements LeaseStore {
  readonly #ready: Promise<Store>
  #store: Store | undefined
  #redis: Connected | undefined
  #sync: RegionSync | undefined
  readonly #onCall: (ms: number) => void
  // RedisStore's exact script reads a key's lease ledgers, so `auto` may decide cold token-bucket
  // and gcra keys by it (LeaseStore.exactReadsLedgers). A region store routes exact and lease
  // calls through its allotments and makes no such promise: with regions, cold keys keep the lease call.
  readonly exactReadsLedgers: boolean

  /** `onCall` hears how long each store call took (a batch), answered or failed: the dashboard's latency. */
  /** `onError` hears the client's connection errors (a refused certificate, a missing socket), each once until it is ready. */
  constructor(
    connect: RedisConnectOptions,
    prefix: string,
    onCall: (ms: number) => void,
    regions?: RegionSettings,
    onError?: (message: string, cause: string) => void,
  ) {
    this.#onCall = onCall
    this.exactReadsLedgers = regions === undefined
    this.#ready = import('floodgate/redis').then(({ RedisStore, RegionSync }) => {
      const report = onError === undefined ? undefined : connectionErrorReport(connect, 'Redis', onError)
      const redis = new RedisStore({ ...withSteadyTls(connect, report?.heard), prefix })
      report?.watch(redis.client as never)
      this.#redis = redis
      if (regions !== undefined) {
        this.#sync = new RegionSync({ region: regions.region, local: redis, peers: regions.peers, interval: regions.intervalMs })
      }
      this.#store = this.#sync?.store ?? redis
      return this.#store
    })
  }

  /** The region store has started: this makes it now, so the sync loop runs before the first decision. */
  start(): Promise<unknown> {
    return this.#ready
  }

  get connected(): boolean {
    return this.#redis?.connected === true
  }

  /** The links to peer regions; undefined without regions (or before the store exists). */
  regionStatus(): RegionSyncStatus | undefined {
    return this.#sync?.status()
  }

  // Not async: once the store exists its own promise is returned as is, with no wrapping promise per decision.
  evaluate(batch: Parameters<Store['evaluate']>[0]): ReturnType<Store['evaluate']> {
    const started = performance.now()
    const answer = this.#store !== undefined ? this.#store.evaluate(batch) : this.#ready.then((store) => store.evaluate(batch))
    // Timed once per call (a batch), answered or failed: a failure's wait is latency the callers saw too.
    const timed = () => this.#onCall(performance.now() - started)
    answer.then(timed, timed)
    return answer
  }

  // Lease calls (`sync: 'lease'`, `'auto'`) and write-back's merges go through the region sync's
  // store too, which draws them on the regional limits and counts them as the region's use.
  lease(batch: Parameters<LeaseStore['lease']>[0]): ReturnType<LeaseStore['lease']> {
    const store = this.#store as LeaseStore | undefined
    return store !== undefined ? store.lease(batch) : this.#ready.then((ready) => (ready as LeaseStore).lease(batch))
  }

  merge(batch: Parameters<NonNullable<Store['merge']>>[0]): ReturnType<NonNullable<Store['merge']>> {
    const store = this.#store
    return store !== undefined ? store.merge!(batch) : this.#ready.then((ready) => ready.merge!(batch))
  }

  // Denials the limiter's deny cache answered are still demand, which moves split allotments.
  noteDenied(key: string, policies: Parameters<Store['reset']>[1], cost: number): void {
    this.#store?.noteDenied?.(key, policies, cost)
  }

  async reset(key: string, policies: Parameters<Store['reset']>[1]) {
    return (this.#store ?? (await this.#ready)).reset(key, policies)
  }

  // The limiter's quick way back after an outage (a reconnect, a Cluster failover), forwarded once the store exists.
  onRecovered(listener: (shard: string) => void): () => void {
    let stop: (() => void) | undefined
    let stopped = false
    void this.#ready.then((store) => {
      if (!stopped) stop = store.onRecovered?.(listener)
    })
    return () => {
      stopped = true
      stop?.()
    }
  }

  recover(shard: string): void {
    this.#store?.recover?.(shard)
  }

  // A Cluster's masters are its shards (RedisStore.shardOf); until the store exists, it is one.
  shardOf(key: string): string {
    return this.#store?.shardOf?.(key) ?? ''
  }

  shards(): readonly string[] {
    return this.#store?.shards?.() ?? ['']
  }

  /** Stops the sync loop (merging and sending what is left once), then closes the Redis store. */
  async close() {
    await this.#ready
    await this.#sync?.close()
    await this.#redis?.close()
  }
}
