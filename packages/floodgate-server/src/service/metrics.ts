// Prometheus metrics of the service: per-rule hit counters (as envoyproxy/ratelimit names them), latency, store health, reloads.

import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client'
import type { SyncState } from 'floodgate'
import type { RegionSyncStatus } from 'floodgate/redis'
import { LatencyHistogram } from './latency-histogram.js'
import { registerRegionMetrics } from './region-metrics.js'
import { registerSyncMetrics } from './sync-metrics.js'

/** Label value used for every rule past the cap, so a huge rules file cannot explode the series count. */
export const OTHER_RULE = '_other'

/** Bounds of the decision-latency histogram, in seconds. */
export const LATENCY_BUCKETS: readonly number[] = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1]

/** How many of one descriptor's hits land in each per-rule counter (upstream splits a request that crosses a threshold). */
export interface HitCounts {
  /** Units charged (the hits addend), as upstream counts them; a check without counting (0) adds nothing. */
  total: number
  over: number
  near: number
  within: number
  /** Hits a shadow-mode rule would have denied but allowed. */
  shadow: number
  /** Hits answered from the limiter's deny cache, without the store. */
  denyCache: number
}

export interface ServiceMetricsOptions {
  /** Most distinct rule labels kept (default 1000); further rules share the `_other` label. */
  maxRuleLabels?: number
  /** Also export Node's process metrics (default true). */
  processMetrics?: boolean
  /**
   * Also export the per-rule counters under envoyproxy/ratelimit's Prometheus names and labels
   * (`ratelimit_service_rate_limit_total_hits{domain,key1,key2}`, as its statsd mapping exports
   * them), plus its error and config-load counters, so existing dashboards keep working.
   */
  upstreamNames?: boolean
  /** Also told of upstream's stats as they happen: the statsd export (statsd.ts). */
  listener?: StatsListener
}

/** Receives envoyproxy/ratelimit's stats as they happen, e.g. to send them over statsd. */
export interface StatsListener {
  /** One descriptor's hits against its stats key (already split as upstream splits them). */
  hit(metricKey: string, counts: HitCounts): void
  /** A call that got an error instead of an answer: `store` (redis_error) or `service` (service_error). */
  requestError(kind: 'store' | 'service'): void
  /** Descriptors of a domain no rules file names (upstream counts each lookup). */
  domainNotFound(domain: string, descriptors: number): void
  /** A call answered OK only because of SHADOW_MODE. */
  globalShadow(): void
  /** A rules load, and whether it succeeded. */
  configLoad(result: 'success' | 'error'): void
  /** One ShouldRateLimit call answered (or failed), and how long it took. */
  grpcCall(ms: number): void
}

/** One rule label's hits not yet handed to its counters (added on every decision, moved on every scrape). */
interface PendingHits {
  readonly labels: { rule: string }
  /** envoyproxy/ratelimit's labels for the same stats key. */
  readonly upstreamLabels: UpstreamLabels
  total: number
  over: number
  near: number
  within: number
  shadow: number
  denyCache: number
}

type PendingField = Exclude<keyof PendingHits, 'labels' | 'upstreamLabels'>

type UpstreamLabels = { domain: string; key1: string; key2: string }

/** Which pending field each upstream counter reads. */
const UPSTREAM_COUNTERS: readonly [string, PendingField][] = [
  ['total_hits', 'total'],
  ['over_limit', 'over'],
  ['near_limit', 'near'],
  ['within_limit', 'within'],
  ['shadow_mode', 'shadow'],
]

/** The service's metrics in their own registry (several services can live in one process, e.g. tests). */
export class ServiceMetrics {
  readonly registry = new Registry()
  readonly #maxRuleLabels: number
  // Per-rule hits are summed here and moved into the counters when they are read: a labelled
  // `inc` hashes and validates its labels each time, six times per decision at worst.
  readonly #pending = new Map<string, PendingHits>()
  readonly #otherRules = pendingHits(OTHER_RULE)
  readonly #latency: LatencyHistogram<'http' | 'grpc'>
  readonly #storeErrors: Counter
  readonly #breaker: Gauge
  readonly #shardBreakers: Gauge<'shard'>
  readonly #openShards = new Set<string>()
  readonly #fallbacks: Counter<'mode'>
  readonly #reloads: Counter<'result'>
  readonly #rules: Gauge
  /** envoyproxy/ratelimit's `should_rate_limit` errors and global shadow count; present with `upstreamNames`. */
  readonly #upstream: { errors: Counter<'err_type'>; globalShadow: Counter; configLoads: Record<'success' | 'error', Counter> } | undefined

  readonly #listener: StatsListener | undefined

  constructor(options: ServiceMetricsOptions = {}) {
    this.#listener = options.listener
    this.#maxRuleLabels = options.maxRuleLabels ?? 1000
    const registers = [this.registry]
    const upstreamOf = new Map<PendingField, Counter<keyof UpstreamLabels>>()
    // Both names of one field are filled from the same pending sum, in one move, whichever is read first.
    const move = (field: PendingField, own: Counter<'rule'>) => {
      const upstream = upstreamOf.get(field)
      for (const hits of this.#everyPending()) moveHits(own, upstream, hits, field)
    }
    const owners = new Map<PendingField, Counter<'rule'>>()
    const perRule = (name: string, help: string, field: PendingField) => {
      const counter: Counter<'rule'> = new Counter({
        name,
        help,
        labelNames: ['rule'] as const,
        registers,
        collect: () => move(field, counter),
      })
      owners.set(field, counter)
    }
    perRule('floodgate_total_hits', 'Hits checked, per rule (the hits addend summed).', 'total')
    perRule('floodgate_over_limit', 'Hits denied for being over the limit, per rule (shadow rules included).', 'over')
    perRule('floodgate_near_limit', 'Hits allowed with at least the near-limit ratio (default 80%) of the limit used, per rule.', 'near')
    perRule('floodgate_within_limit', 'Hits allowed, per rule.', 'within')
    perRule('floodgate_shadow_mode', 'Hits a shadow-mode rule would have denied but allowed, per rule.', 'shadow')
    perRule('floodgate_deny_cache_hits', 'Denials answered from the in-process deny cache without the store, per rule.', 'denyCache')
    if (options.upstreamNames) {
      for (const [suffix, field] of UPSTREAM_COUNTERS) {
        upstreamOf.set(
          field,
          new Counter({
            name: `ratelimit_service_rate_limit_${suffix}`,
            help: `envoyproxy/ratelimit's ${suffix} per stats key (domain, first two key levels), as its statsd mapping exports it.`,
            labelNames: ['domain', 'key1', 'key2'] as const,
            registers,
            collect: () => move(field, owners.get(field) as Counter<'rule'>),
          }),
        )
      }
      const errors = new Counter({
        name: 'ratelimit_service_should_rate_limit_error',
        help: "envoyproxy/ratelimit's failed calls: redis_error (the store did not answer), service_error (a bad request).",
        labelNames: ['err_type'] as const,
        registers,
      })
      errors.inc({ err_type: 'redis_error' }, 0)
      errors.inc({ err_type: 'service_error' }, 0)
      const globalShadow = new Counter({
        name: 'ratelimit_service_global_shadow_mode',
        help: 'Requests answered OK only because of SHADOW_MODE.',
        registers,
      })
      const configLoads = {
        success: new Counter({ name: 'ratelimit_service_config_load_success', help: 'Rule loads that succeeded.', registers }),
        error: new Counter({
          name: 'ratelimit_service_config_load_error',
          help: 'Rule loads that failed (the previous rules keep serving).',
          registers,
        }),
      }
      this.#upstream = { errors, globalShadow, configLoads }
    }
    this.#latency = new LatencyHistogram({
      name: 'floodgate_decision_duration_seconds',
      help: 'Time to decide one request (all its descriptors), by transport.',
      labelName: 'transport',
      labelValues: ['http', 'grpc'],
      buckets: LATENCY_BUCKETS,
      registers,
    })
    this.#storeErrors = new Counter({ name: 'floodgate_store_errors_total', help: 'Store calls that failed or timed out.', registers })
    this.#breaker = new Gauge({
      name: 'floodgate_breaker_state',
      help: 'Store circuit breaker: 0 closed (calls go to the store), 1 open for some or all keys (the failure mode decides them).',
      registers,
    })
    this.#shardBreakers = new Gauge({
      name: 'floodgate_breaker_open',
      help:
        'Store shards whose circuit breaker is open (their keys are decided by the failure mode), by shard: a memcached ' +
        'server or Redis Cluster master (host:port), empty for a store that is one shard. Present only while open.',
      labelNames: ['shard'] as const,
      registers,
    })
    this.#fallbacks = new Counter({
      name: 'floodgate_fallback_decisions_total',
      help: 'Decisions made without the store, by failure mode (open, closed, local).',
      labelNames: ['mode'] as const,
      registers,
    })
    this.#reloads = new Counter({
      name: 'floodgate_config_reloads_total',
      help: 'Rule reloads, by result (success, error).',
      labelNames: ['result'] as const,
      registers,
    })
    this.#rules = new Gauge({ name: 'floodgate_rules_loaded', help: 'Rules in the active configuration.', registers })
    this.#reloads.inc({ result: 'success' }, 0)
    this.#reloads.inc({ result: 'error' }, 0)
    this.#storeErrors.inc(0)
    this.#breaker.set(0)
    if (options.processMetrics ?? true) collectDefaultMetrics({ register: this.registry, prefix: 'floodgate_' })
  }

  /**
   * Counts one descriptor's hits against its stats key (the rule id, or upstream's key with request
   * values for `detailed_metric` / `value_to_metric`); past `maxRuleLabels` keys they go to `_other`.
   */
  recordHit(metricKey: string, counts: HitCounts): void {
    if (counts.total === 0) return
    this.#listener?.hit(metricKey, counts)
    const pending = this.#pendingFor(metricKey)
    pending.total += counts.total
    pending.over += counts.over
    pending.near += counts.near
    pending.within += counts.within
    pending.shadow += counts.shadow
    pending.denyCache += counts.denyCache
  }

  /** A request that got an error instead of an answer: `store` (the store did not answer) or `service` (bad request). */
  recordRequestError(kind: 'store' | 'service'): void {
    this.#listener?.requestError(kind)
    this.#upstream?.errors.inc({ err_type: kind === 'store' ? 'redis_error' : 'service_error' })
  }

  /** A request's descriptors looked up in a domain the rules do not have (statsd only, as upstream's domain_not_found). */
  recordDomainNotFound(domain: string, descriptors: number): void {
    this.#listener?.domainNotFound(domain, descriptors)
  }

  /** A request answered OK only because of global shadow mode. */
  recordGlobalShadow(): void {
    this.#listener?.globalShadow()
    this.#upstream?.globalShadow.inc()
  }

  /** One ShouldRateLimit call ended, answered or not (upstream's ratelimit_server.ShouldRateLimit.* stats). */
  recordGrpcCall(ms: number): void {
    this.#listener?.grpcCall(ms)
  }

  /** Records how long one request took to decide. */
  observeLatency(transport: 'http' | 'grpc', seconds: number): void {
    this.#latency.observe(transport, seconds)
  }

  recordStoreError(): void {
    this.#storeErrors.inc()
  }

  /** The breaker of `shard` opened or closed (`''`: a store that is one shard). */
  setBreakerOpen(open: boolean, shard = ''): void {
    if (open) {
      this.#openShards.add(shard)
      this.#shardBreakers.set({ shard }, 1)
    } else if (this.#openShards.delete(shard)) {
      // Removed, not set to 0: a Cluster's failed-over masters would otherwise pile up as series.
      this.#shardBreakers.remove({ shard })
    }
    this.#breaker.set(this.#openShards.size > 0 ? 1 : 0)
  }

  recordFallback(mode: 'open' | 'closed' | 'local'): void {
    this.#fallbacks.inc({ mode })
  }

  recordReload(result: 'success' | 'error', ruleCount?: number): void {
    this.#reloads.inc({ result })
    this.#listener?.configLoad(result)
    this.#upstream?.configLoads[result].inc()
    if (ruleCount !== undefined) this.#rules.set(ruleCount)
  }

  /** Exports the links to peer regions (replication lag, time since heard, usage exchanged); see region-metrics.ts. */
  watchRegions(status: () => RegionSyncStatus | undefined): void {
    registerRegionMetrics(this.registry, status)
  }

  /** Exports the sync modes' state (write-back's unflushed units, the leases held); see sync-metrics.ts. */
  watchSync(state: () => SyncState): void {
    registerSyncMetrics(this.registry, state)
  }

  /** The exposition text and its content type, for `GET /metrics`. */
  async expose(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() }
  }

  /** The rule's own label until the cap is reached; past it, new rules share `_other`. */
  #pendingFor(ruleId: string): PendingHits {
    let pending = this.#pending.get(ruleId)
    if (pending === undefined) {
      if (this.#pending.size >= this.#maxRuleLabels) return this.#otherRules
      pending = pendingHits(ruleId)
      this.#pending.set(ruleId, pending)
    }
    return pending
  }

  *#everyPending(): Iterable<PendingHits> {
    yield* this.#pending.values()
    yield this.#otherRules
  }
}

function pendingHits(rule: string): PendingHits {
  return { labels: { rule }, upstreamLabels: upstreamLabelsOf(rule), total: 0, over: 0, near: 0, within: 0, shadow: 0, denyCache: 0 }
}

const IPV4 = /\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}/g

/** A stats key as upstream names it in statsd: `:` and `|` become `_`, and so do the dots of an IPv4 address. */
export function sanitizeStatName(metricKey: string): string {
  return metricKey.replace(/[:|]/g, '_').replace(IPV4, (ip) => ip.replace(/\./g, '_'))
}

/**
 * Upstream's labels of a stats key: its statsd name is sanitized (`:` and `|` become `_`, the dots
 * of an IPv4 address too), then the statsd mapping takes the domain and the next two dotted parts.
 */
export function upstreamLabelsOf(metricKey: string): UpstreamLabels {
  const [domain = '', key1 = '', key2 = ''] = sanitizeStatName(metricKey).split('.')
  return { domain, key1, key2 }
}

/** Adds a rule's pending hits of one kind to its counters; a kind with none adds no series, as before any hit. */
function moveHits(
  counter: Counter<'rule'>,
  upstream: Counter<keyof UpstreamLabels> | undefined,
  pending: PendingHits,
  field: PendingField,
): void {
  const hits = pending[field]
  if (hits === 0) return
  pending[field] = 0
  counter.inc(pending.labels, hits)
  upstream?.inc(pending.upstreamLabels, hits)
}
