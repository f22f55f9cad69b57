// RegionSync: links this region's store with peer regions' Redis, so policies with `regions` limit across regions.

import { randomBytes } from 'node:crypto'
import { parseDuration, type Duration } from '../core/duration.js'
import { FloodgateError } from '../core/errors.js'
import type { Policy } from '../core/policy.js'
import type { Store } from '../stores/store.js'
import { toConnection, type Connection, type RedisClientLike } from '../stores/redis/connection.js'
import { createClient } from '../stores/redis/create-client.js'
import { PeerLink, type PeerStatus } from './peer-link.js'
import { RegionStore } from './region-store.js'
import { AskBook } from './asks.js'
import { startTick, tick, type RegionContext, type RegionCounters } from './replicator.js'
import { UsageTracker } from './usage-tracker.js'
import { UsageViews } from './usage-views.js'

/** Timers the sync loop schedules its ticks with (tests inject their own and call `tick()`). */
export interface RegionTimers {
  setTimeout(callback: () => void, ms: number): unknown
  clearTimeout(handle: unknown): void
}

/** The region's own store: a RedisStore, or any store with the Redis client and key prefix it uses. */
export interface RegionLocal {
  readonly client: RedisClientLike
  /** The store's key prefix (RedisStore's `prefix`, default `fg:`). */
  readonly prefix?: string
}

export interface RegionSyncOptions {
  /** This region's name: letters, digits, `.`, `_` and `-`. Every region must be given the same set of names. */
  region: string
  /** The region's own store (a RedisStore): decisions go to it, and usage is kept beside its state. */
  local: Store & RegionLocal
  /** Every other region: its name and its Redis, as a `redis://` URL or a client (ioredis or node-redis). */
  peers: Readonly<Record<string, string | RedisClientLike>>
  /** How often usage is merged and exchanged (default 100ms). The bounds in docs/regions.md scale with it. */
  interval?: Duration
  /** Longest wait for one peer's exchange per tick (default 1s); a peer that does not answer is skipped until the next tick. */
  timeout?: Duration
  /** Most (key, policy, window) entries kept in memory (default 100 000). */
  maxKeys?: number
  /** Milliseconds since the epoch (default `Date.now`); windows and regional limits follow it. */
  clock?: () => number
  /** Default: the global timers. Inject to drive ticks by hand with `tick()`. */
  timers?: RegionTimers
}

/** What `status()` reports: the links to peers and totals since start. */
export interface RegionSyncStatus {
  readonly region: string
  readonly peers: readonly PeerStatus[]
  /** Peers not heard from within `3 × interval + timeout`: their region keeps serving, with older knowledge of it. */
  readonly degraded: readonly string[]
  readonly counters: Readonly<RegionCounters>
}

const NAME = /^[A-Za-z0-9._-]{1,64}$/
/** Split mode: demand over this many intervals counts as recent (demand.ts). */
const HORIZON_INTERVALS = 5
/**
 * Split mode: how long a peer's ask is kept. A short peer asks again every exchange, so this
 * only needs to outlast one late exchange; an ask kept longer would outlive the asker's need.
 */
const ASK_TTL_INTERVALS = 3

/**
 * Links this region's store to its peers. Give the limiter `sync.store` instead of the region's
 * store; policies with `regions: 'shared' | 'split'` then limit across regions, the others stay
 * per region. The sync loop runs every `interval` in the background: it merges this process's
 * counts into the region's Redis, hands units to short peers (split), and exchanges usage with
 * every peer's Redis. No request waits for another region.
 *
 * ```ts
 * const local = new RedisStore({ url: 'redis://eu-redis:6379' })
 * const sync = new RegionSync({ region: 'eu', local, peers: { us: 'redis://us-redis:6379' } })
 * const limiter = new RateLimiter({
 *   store: sync.store,
 *   policies: [{ algorithm: 'fixed-window', limit: 1000, period: '1m', regions: 'split' }],
 * })
 * ```
 */
export class RegionSync {
  /** The store to give the limiter. */
  readonly store: Store
  readonly region: string
  private readonly ctx: RegionContext
  private readonly timers: RegionTimers
  private timer: unknown
  private running: Promise<void> = Promise.resolve()
  // Exchanges the loop's ticks started and did not wait for (close waits for them).
  private readonly exchanging = new Set<Promise<void>>()
  private closed = false

  constructor(options: RegionSyncOptions) {
    if (options === null || typeof options !== 'object') throw invalid('options', 'expected { region, local, peers }')
    const region = checkName(options.region, 'region')
    const local = options.local
    if (local === null || typeof local !== 'object' || typeof local.evaluate !== 'function' || local.client === undefined) {
      throw invalid('local', "expected the region's RedisStore (a store with the Redis `client` it uses)")
    }
    const localConnection = toConnection(local.client)
    const peers = readPeers(options.peers, region)
    const intervalMs = parseDuration(options.interval ?? '100ms', 'RegionSync interval')
    const timeoutMs = parseDuration(options.timeout ?? '1s', 'RegionSync timeout')
    const maxKeys = options.maxKeys ?? 100_000
    const horizonMs = HORIZON_INTERVALS * Math.max(1, intervalMs)
    if (!Number.isInteger(maxKeys) || maxKeys < 1) throw invalid('maxKeys', `must be a whole number ≥ 1, got ${JSON.stringify(maxKeys)}`)
    this.region = region
    this.timers = options.timers ?? {
      setTimeout: (callback, ms) => setTimeout(callback, ms).unref(),
      clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
    }
    this.ctx = {
      region,
      regions: [region, ...peers.map((peer) => peer.name)].sort(),
      prefix: local.prefix ?? 'fg:',
      local: localConnection,
      store: local,
      peers,
      tracker: new UsageTracker(randomBytes(6).toString('base64url'), maxKeys),
      views: new UsageViews(maxKeys),
      clock: options.clock ?? Date.now,
      intervalMs: Math.max(1, intervalMs),
      timeoutMs: Math.max(1, timeoutMs),
      policies: new Map<string, Policy>(),
      asks: new AskBook(ASK_TTL_INTERVALS * Math.max(1, intervalMs)),
      horizonMs,
      counters: { merged: 0, unitsGiven: 0, unitsClaimed: 0, lost: 0, ticks: 0, failedTicks: 0 },
      lastTickMs: 0,
    }
    this.store = new RegionStore(this.ctx)
    this.schedule()
  }

  /** Every region's name, sorted (base shares of split policies follow this order). */
  get regions(): readonly string[] {
    return this.ctx.regions
  }

  /** Runs one tick now (after the one in progress, if any). The loop keeps its own schedule. */
  tick(): Promise<void> {
    this.running = this.running.then(() => tick(this.ctx))
    return this.running
  }

  /** The links to peers and totals since start. */
  status(): RegionSyncStatus {
    const now = this.ctx.clock()
    const peers = this.ctx.peers.map((peer) => peer.status(now))
    const horizon = 3 * this.ctx.intervalMs + this.ctx.timeoutMs
    const quiet = (peer: PeerStatus) => !peer.connected || peer.lastHeardAt === undefined || now - peer.lastHeardAt > horizon
    const degraded = peers.filter(quiet).map((peer) => peer.name)
    return { region: this.region, peers, degraded, counters: { ...this.ctx.counters } }
  }

  /** Stops the loop, merges and sends what is left once, and closes the peer clients it created. The region's store stays open. */
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    if (this.timer !== undefined) this.timers.clearTimeout(this.timer)
    for (const entry of this.ctx.tracker.all()) this.ctx.tracker.touch(entry)
    await this.running
    await Promise.all(this.exchanging)
    await this.tick()
    await Promise.all(this.ctx.peers.filter((peer) => peer.owned).map((peer) => peer.connection.close().catch(() => undefined)))
  }

  // The next tick starts an interval after this one started, once the region's part of this one
  // is done; its exchanges with peers run on meanwhile (replicator.ts startTick). So counts and
  // hand-overs move every interval, not every interval plus a link's round trip.
  private schedule(delayMs = this.ctx.intervalMs): void {
    if (this.closed) return
    this.timer = this.timers.setTimeout(() => {
      this.timer = undefined
      const started = performance.now()
      const step = this.running.then(() => startTick(this.ctx))
      this.running = step.then(() => undefined)
      void step.then(({ exchanged }) => {
        this.exchanging.add(exchanged)
        void exchanged.then(() => this.exchanging.delete(exchanged))
        const elapsed = performance.now() - started
        // A tick longer than the interval (many keys) still leaves the process a quarter interval to itself.
        this.schedule(Math.max(this.ctx.intervalMs / 4, this.ctx.intervalMs - elapsed))
      })
    }, delayMs)
  }
}

function readPeers(peers: RegionSyncOptions['peers'], region: string): PeerLink[] {
  if (peers === null || typeof peers !== 'object') throw invalid('peers', "expected an object like { us: 'redis://us-redis:6379' }")
  return Object.entries(peers).map(([name, target]) => {
    checkName(name, `peers.${name}`)
    if (name === region) throw invalid(`peers.${name}`, 'is this region itself; list only the other regions')
    const field = `peers.${name}`
    if (typeof target === 'string') {
      if (!/^rediss?:\/\//.test(target)) throw invalid(field, `expected a redis:// or rediss:// URL, got ${JSON.stringify(target)}`)
      // No offline queue: an exchange with an unreachable peer fails at once instead of piling up.
      const client = createClient({ url: target, redis: { enableOfflineQueue: false, maxRetriesPerRequest: 0 } }, field)
      // A peer out of reach is reported by status() and metrics, not as an unhandled 'error' event.
      ;(client as { on?: (event: string, listener: () => void) => unknown }).on?.('error', () => undefined)
      return new PeerLink(name, connectionOf(client, field), true)
    }
    return new PeerLink(name, connectionOf(target, field), false)
  })
}

function connectionOf(client: unknown, field: string): Connection {
  try {
    const connection = toConnection(client)
    if (connection.isIdle()) connection.connect()
    return connection
  } catch (error) {
    throw invalid(field, error instanceof Error ? error.message : String(error))
  }
}

function checkName(name: unknown, field: string): string {
  if (typeof name !== 'string' || !NAME.test(name)) {
    throw invalid(field, `a region name is 1 to 64 letters, digits, '.', '_' or '-', got ${JSON.stringify(name)}`)
  }
  return name
}

function invalid(field: string, message: string): FloodgateError {
  return new FloodgateError('INVALID_OPTION', `RegionSync ${field}: ${message}`)
}
