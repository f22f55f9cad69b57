// What the dashboard shows, gathered as decisions happen: rates per second and per rule, the most
// limited keys, store health; bounded in memory whatever the traffic.

import { FloodgateError } from '../core/errors.js'
import type { RateLimiter } from '../limiter/rate-limiter.js'
import type { SyncState } from '../limiter/sync-state.js'
import type { Decision } from '../limiter/types.js'
import type { RegionSyncStatus } from '../regions/region-sync.js'
import { MemoryStore } from '../stores/memory/memory-store.js'
import { hashKey, RecentTopKeys, type RecentTopKeysOptions } from './recent-top-keys.js'
import { SecondRing } from './seconds.js'
import type { DashboardSnapshot, RegionsSnapshot, RuleSnapshot, SyncSnapshot } from './snapshot.js'

/** Label shared by every rule past `maxRules`. */
export const OTHER_RULE = '_other'

const ALLOWED = 0
const DENIED = 1
const FALLBACK = 2
/** Seconds over which the "now" figures (rates per rule, latency quantiles) are averaged. */
const RECENT_SECONDS = 10

/** The active configuration, as the dashboard's rules panel shows it. */
export interface ConfigState {
  /** Rules (or policies) in force. */
  rules: number
  /** Files they came from (empty for a limiter configured in code). */
  files: readonly string[]
  /** Issues of the latest failed reload, while the previous rules keep serving; null when the files are valid. */
  lastReloadError: readonly string[] | null
  /**
   * The names the rules are recorded under (rule ids, or policy names for a limiter), so that the
   * rules table lists every loaded rule, with zero counts until it is hit. At most `maxRules` are listed.
   */
  ids?: readonly string[]
}

export interface DashboardCollectorOptions {
  /** Seconds of history kept and charted (default 120). */
  historySeconds?: number
  /** Rules tracked by name (default 50); the rest share the `_other` row, so a huge rules file cannot grow memory. */
  maxRules?: number
  /** Rules whose per-second series the snapshot carries, the busiest first (default 8); the others give totals only. */
  chartedRules?: number
  /** The top-keys sketch (default: 100 counters per 1-minute window, 5 windows). */
  topKeys?: RecentTopKeysOptions
  /** Keys appear as `sha256:` + 16 hex digits unless this is `raw` (they may hold user ids or IP addresses). */
  keys?: 'hashed' | 'raw'
  /** Page refresh period the snapshot suggests, in ms (default 1000). */
  refreshMs?: number
  /** Milliseconds since the epoch (default `Date.now`); tests inject one. */
  clock?: () => number
  /** Where state lives, as shown: `memory`, `redis`, … (set by `watch` from the limiter's store when not given). */
  storeKind?: string
  /** The active configuration (a limiter's own policies when `watch` is used and this is not given). */
  config?: () => ConfigState
  /** Lease and write-back state (default with `watch`: the limiter's `syncState()`). */
  sync?: () => SyncState | null
  /** The regions' links (`RegionSync.status()`, or undefined while there are none). */
  regions?: () => RegionSyncStatus | undefined
}

/** What `watch` feeds from a limiter. */
export interface WatchOptions {
  /** Count each decision (default true). False when decisions are recorded elsewhere (the service records them per rule). */
  decisions?: boolean
  /** The row a decision counts under (default: the deciding policy's name). */
  ruleOf?: (key: string, decision: Decision) => string
}

interface RuleSeries {
  readonly ring: SecondRing
  allowed: number
  denied: number
}

/**
 * Collects the dashboard's figures. Feed it with `watch(limiter)` (an app embedding the limiter)
 * or with `record` from wherever decisions are counted (the service, per rule); read it with
 * `snapshot()`, which is the JSON the page and other tools read. Memory is fixed at construction:
 * rings of `historySeconds` slots, at most `maxRules + 1` rule rows and a top-keys sketch of
 * `windows × capacity` entries.
 */
export class DashboardCollector {
  readonly refreshMs: number
  readonly #history: number
  readonly #maxRules: number
  readonly #chartedRules: number
  readonly #clock: () => number
  readonly #ring: SecondRing
  readonly #rules = new Map<string, RuleSeries>()
  readonly #topKeys: RecentTopKeys
  readonly #rawKeys: boolean
  #storeKind: string
  #config: (() => ConfigState) | undefined
  #sync: (() => SyncState | null) | undefined
  readonly #regions: (() => RegionSyncStatus | undefined) | undefined
  /** Whether store latency is measured at all (an in-process store has none to show). */
  #timed = false
  #allowed = 0
  #denied = 0
  #storeErrors = 0
  // The shards whose breaker is open (a store's shards are few; the limiter bounds them).
  readonly #openShards = new Set<string>()
  readonly #fallbacks = { open: 0, closed: 0, local: 0 }

  constructor(options: DashboardCollectorOptions = {}) {
    this.#history = positiveInteger(options.historySeconds ?? 120, 'historySeconds')
    this.#maxRules = positiveInteger(options.maxRules ?? 50, 'maxRules')
    this.#chartedRules = positiveInteger(options.chartedRules ?? 8, 'chartedRules')
    this.refreshMs = positiveInteger(options.refreshMs ?? 1000, 'refreshMs')
    this.#clock = options.clock ?? Date.now
    // One more slot than shown: the current second is being filled while the last whole ones are read.
    this.#ring = new SecondRing(this.#history + 1, 3, true)
    this.#topKeys = new RecentTopKeys(options.topKeys)
    this.#rawKeys = options.keys === 'raw'
    this.#storeKind = options.storeKind ?? 'unknown'
    this.#config = options.config
    this.#sync = options.sync
    this.#regions = options.regions
  }

  /**
   * Counts `allowed` and `denied` units of one decision under `rule`; denied units count toward
   * `key` in the top-keys sketch.
   */
  record(rule: string, key: string, allowed: number, denied: number): void {
    if (!(allowed > 0) && !(denied > 0)) return
    const second = Math.floor(this.#clock() / 1000)
    const series = this.#ruleSeries(rule)
    if (allowed > 0) {
      this.#allowed += allowed
      series.allowed += allowed
      this.#ring.add(ALLOWED, second, allowed)
      series.ring.add(ALLOWED, second, allowed)
    }
    if (denied > 0) {
      this.#denied += denied
      series.denied += denied
      this.#ring.add(DENIED, second, denied)
      series.ring.add(DENIED, second, denied)
      this.#topKeys.add(key, denied, second * 1000)
    }
  }

  /** One store call's duration, in ms. */
  recordStoreLatency(ms: number): void {
    this.#timed = true
    this.#ring.observe(Math.floor(this.#clock() / 1000), ms)
  }

  recordStoreError(): void {
    this.#storeErrors++
  }

  /** A breaker of `shard` opened or closed (`''`: a store that is one shard). */
  setBreakerOpen(open: boolean, shard = ''): void {
    if (open) this.#openShards.add(shard)
    else this.#openShards.delete(shard)
  }

  /** A decision made without the store, by the failure mode. */
  recordFallback(mode: 'open' | 'closed' | 'local'): void {
    this.#fallbacks[mode]++
    this.#ring.add(FALLBACK, Math.floor(this.#clock() / 1000), 1)
  }

  /**
   * Feeds the collector from a RateLimiter's events: decisions (unless `decisions: false`), store
   * errors, the breaker and fallbacks; with a store that is not in-process, each decision the store
   * made also gives a latency sample (the time the caller waited, batching included). Returns a
   * function that stops watching.
   */
  watch(limiter: RateLimiter, options: WatchOptions = {}): () => void {
    const inProcess = limiter.store instanceof MemoryStore
    if (this.#storeKind === 'unknown') this.#storeKind = inProcess ? 'memory' : limiter.store.constructor.name
    const ids = options.ruleOf === undefined ? limiter.policies.map((policy) => policy.name) : undefined
    this.#config ??= () => ({ rules: limiter.policies.length, files: [], lastReloadError: null, ids })
    this.#sync ??= () => limiter.syncState()
    const ruleOf = options.ruleOf ?? ((_key: string, decision: Decision) => decision.policy)
    const onDecision = (key: string, decision: Decision, cost: number, elapsedMs: number) => {
      if (!inProcess && decision.source === 'store') this.recordStoreLatency(elapsedMs)
      this.record(ruleOf(key, decision), key, decision.allowed ? cost : 0, decision.allowed ? 0 : cost)
    }
    const onError = () => this.recordStoreError()
    const onOpen = (shard: string) => this.setBreakerOpen(true, shard)
    const onClose = (shard: string) => this.setBreakerOpen(false, shard)
    const onFallback = (source: Decision['source']) =>
      this.recordFallback(source === 'fallback-closed' ? 'closed' : source === 'fallback-local' ? 'local' : 'open')
    if (options.decisions ?? true) limiter.on('decision', onDecision)
    limiter.on('store-error', onError)
    limiter.on('breaker-open', onOpen)
    limiter.on('breaker-close', onClose)
    limiter.on('fallback', onFallback)
    return () => {
      limiter.off('decision', onDecision)
      limiter.off('store-error', onError)
      limiter.off('breaker-open', onOpen)
      limiter.off('breaker-close', onClose)
      limiter.off('fallback', onFallback)
    }
  }

  /** Everything the page shows, as of now: the JSON of `GET <dashboard>/data.json` (see docs/dashboard.md). */
  snapshot(): DashboardSnapshot {
    const now = this.#clock()
    const end = Math.floor(now / 1000)
    const count = this.#history
    const time = Array.from({ length: count }, (_, i) => end - count + i)
    const p50: (number | null)[] = []
    const p99: (number | null)[] = []
    for (const second of time) {
      p50.push(this.#timed ? this.#ring.quantile(0.5, second, second + 1) : null)
      p99.push(this.#timed ? this.#ring.quantile(0.99, second, second + 1) : null)
    }
    const rules: RuleSnapshot[] = [...this.#rules].map(([rule, series]) => {
      const recentAllowed = sum(series.ring.series(ALLOWED, end, RECENT_SECONDS))
      const recentDenied = sum(series.ring.series(DENIED, end, RECENT_SECONDS))
      return {
        rule,
        allowed: series.allowed,
        denied: series.denied,
        allowedPerSecond: recentAllowed / RECENT_SECONDS,
        deniedPerSecond: recentDenied / RECENT_SECONDS,
      }
    })
    const busy = (row: RuleSnapshot) => row.deniedPerSecond + row.allowedPerSecond
    rules.sort((a, b) => busy(b) - busy(a) || b.denied - a.denied || a.rule.localeCompare(b.rule))
    for (const row of rules.slice(0, this.#chartedRules)) {
      const ring = this.#rules.get(row.rule)!.ring
      row.series = { allowed: ring.series(ALLOWED, end, count), denied: ring.series(DENIED, end, count) }
    }
    const config = this.#config?.() ?? null
    // Loaded rules not hit yet, after the busy ones: the table shows what is in force, not only what was seen.
    for (const id of config?.ids ?? []) {
      if (rules.length >= this.#maxRules) break
      if (!this.#rules.has(id)) rules.push({ rule: id, allowed: 0, denied: 0, allowedPerSecond: 0, deniedPerSecond: 0 })
    }
    const recentFrom = end - RECENT_SECONDS
    return {
      version: 1,
      now,
      refreshMs: this.refreshMs,
      series: {
        stepMs: 1000,
        time,
        allowed: this.#ring.series(ALLOWED, end, count),
        denied: this.#ring.series(DENIED, end, count),
        fallback: this.#ring.series(FALLBACK, end, count),
        storeLatencyP50Ms: p50,
        storeLatencyP99Ms: p99,
      },
      totals: { allowed: this.#allowed, denied: this.#denied },
      rules,
      topKeys: {
        hashed: !this.#rawKeys,
        spanMs: this.#topKeys.spanMs,
        windowMs: this.#topKeys.windowMs,
        capacity: this.#topKeys.capacity,
        keys: this.#topKeys
          .top(20, now)
          .map(({ key, count, error }) => ({ key: this.#rawKeys ? key : hashKey(key), denied: count, error })),
      },
      store: {
        kind: this.#storeKind,
        breaker: this.#openShards.size > 0 ? 'open' : 'closed',
        openShards: [...this.#openShards],
        errors: this.#storeErrors,
        fallbacks: { ...this.#fallbacks },
        latency: this.#timed
          ? {
              windowMs: RECENT_SECONDS * 1000,
              samples: this.#ring.samples(recentFrom, end),
              p50Ms: this.#ring.quantile(0.5, recentFrom, end),
              p99Ms: this.#ring.quantile(0.99, recentFrom, end),
            }
          : null,
      },
      config: config && { rules: config.rules, files: config.files, lastReloadError: config.lastReloadError },
      sync: this.#syncSnapshot(now),
    }
  }

  // Null when there is nothing to show: no sync mode used and no regions.
  #syncSnapshot(now: number): SyncSnapshot | null {
    const state = this.#sync?.() ?? null
    const status = this.#regions?.()
    const regions = status === undefined ? null : regionsSnapshot(status, now)
    if (state?.writeBack == null && state?.leases == null && regions === null) return null
    return { writeBack: state?.writeBack ?? null, leases: state?.leases ?? null, regions }
  }

  #ruleSeries(rule: string): RuleSeries {
    let series = this.#rules.get(rule)
    if (series === undefined) {
      if (rule !== OTHER_RULE && this.#rules.size >= this.#maxRules) return this.#ruleSeries(OTHER_RULE)
      series = { ring: new SecondRing(this.#history + 1, 2), allowed: 0, denied: 0 }
      this.#rules.set(rule, series)
    }
    return series
  }
}

function regionsSnapshot(status: RegionSyncStatus, now: number): RegionsSnapshot {
  return {
    region: status.region,
    degraded: [...status.degraded],
    peers: status.peers.map((peer) => ({
      name: peer.name,
      up: peer.connected,
      lagMs: peer.lagMs ?? null,
      lastHeardMsAgo: peer.lastHeardAt === undefined ? null : Math.max(0, now - peer.lastHeardAt),
      sent: peer.sent,
      received: peer.received,
      failures: peer.failures,
    })),
    unitsGiven: status.counters.unitsGiven,
    unitsClaimed: status.counters.unitsClaimed,
    lost: status.counters.lost,
  }
}

function sum(values: readonly number[]): number {
  let total = 0
  for (const value of values) total += value
  return total
}

function positiveInteger(value: number, name: string): number {
  if (!Number.isInteger(value) || value < 1) {
    throw new FloodgateError('INVALID_OPTION', `${name}: expected a whole number ≥ 1, got ${value}`)
  }
  return value
}
