// Prometheus metrics of the service: per-rule hit counters (as envoyproxy/ratelimit names them), latency, store health, reloads.

import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'

/** Label value used for every rule past the cap, so a huge rules file cannot explode the series count. */
export const OTHER_RULE = '_other'

/** Bounds of the decision-latency histogram, in seconds. */
export const LATENCY_BUCKETS: readonly number[] = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1]

/** How one descriptor's decision counts, for the per-rule counters. */
export interface HitOutcome {
  /** Units charged (the hits addend), as upstream counts them; a check without counting (0) adds nothing. */
  hits: number
  allowed: boolean
  /** Allowed with at least the near-limit ratio of the limit used. */
  near: boolean
  /** A shadow-mode rule that would have denied. */
  wouldDeny: boolean
  /** Answered from the limiter's deny cache, without the store. */
  denyCache: boolean
}

export interface ServiceMetricsOptions {
  /** Most distinct rule labels kept (default 1000); further rules share the `_other` label. */
  maxRuleLabels?: number
  /** Also export Node's process metrics (default true). */
  processMetrics?: boolean
}

/** One rule label's hits not yet handed to its counters (added on every decision, moved on every scrape). */
interface PendingHits {
  readonly labels: { rule: string }
  total: number
  over: number
  near: number
  within: number
  shadow: number
  denyCache: number
}

type PendingField = Exclude<keyof PendingHits, 'labels'>

/** The service's metrics in their own registry (several services can live in one process, e.g. tests). */
export class ServiceMetrics {
  readonly registry = new Registry()
  readonly #maxRuleLabels: number
  // Per-rule hits are summed here and moved into the counters when they are read: a labelled
  // `inc` hashes and validates its labels each time, six times per decision at worst.
  readonly #pending = new Map<string, PendingHits>()
  readonly #otherRules = pendingHits(OTHER_RULE)
  readonly #latencyOf: Record<'http' | 'grpc', { observe(seconds: number): void }>
  readonly #storeErrors: Counter
  readonly #breaker: Gauge
  readonly #fallbacks: Counter<'mode'>
  readonly #reloads: Counter<'result'>
  readonly #rules: Gauge

  constructor(options: ServiceMetricsOptions = {}) {
    this.#maxRuleLabels = options.maxRuleLabels ?? 1000
    const registers = [this.registry]
    const everyPending = () => this.#everyPending()
    const perRule = (name: string, help: string, field: PendingField) =>
      new Counter({
        name,
        help,
        labelNames: ['rule'] as const,
        registers,
        collect() {
          for (const hits of everyPending()) moveHits(this, hits, field)
        },
      })
    perRule('floodgate_total_hits', 'Hits checked, per rule (the hits addend summed).', 'total')
    perRule('floodgate_over_limit', 'Hits denied for being over the limit, per rule (shadow rules included).', 'over')
    perRule('floodgate_near_limit', 'Hits allowed with at least the near-limit ratio (default 80%) of the limit used, per rule.', 'near')
    perRule('floodgate_within_limit', 'Hits allowed, per rule.', 'within')
    perRule('floodgate_shadow_mode', 'Hits a shadow-mode rule would have denied but allowed, per rule.', 'shadow')
    perRule('floodgate_deny_cache_hits', 'Denials answered from the in-process deny cache without the store, per rule.', 'denyCache')
    const latency = new Histogram({
      name: 'floodgate_decision_duration_seconds',
      help: 'Time to decide one request (all its descriptors), by transport.',
      labelNames: ['transport'] as const,
      buckets: [...LATENCY_BUCKETS],
      registers,
    })
    // The labelled children, looked up once: observing through them skips label validation.
    this.#latencyOf = { http: latency.labels('http'), grpc: latency.labels('grpc') }
    this.#storeErrors = new Counter({ name: 'floodgate_store_errors_total', help: 'Store calls that failed or timed out.', registers })
    this.#breaker = new Gauge({ name: 'floodgate_breaker_state', help: 'Store circuit breaker: 0 closed (calls go to the store), 1 open (the failure mode decides).', registers })
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

  /** Counts one descriptor's decision against its rule. */
  recordHit(ruleId: string, outcome: HitOutcome): void {
    const hits = outcome.hits
    if (hits === 0) return
    const pending = this.#pendingFor(ruleId)
    pending.total += hits
    if (outcome.denyCache) pending.denyCache += hits
    if (outcome.wouldDeny) {
      pending.over += hits
      pending.shadow += hits
    } else if (!outcome.allowed) {
      pending.over += hits
    } else {
      pending.within += hits
      if (outcome.near) pending.near += hits
    }
  }

  /** Records how long one request took to decide. */
  observeLatency(transport: 'http' | 'grpc', seconds: number): void {
    this.#latencyOf[transport].observe(seconds)
  }

  recordStoreError(): void {
    this.#storeErrors.inc()
  }

  setBreakerOpen(open: boolean): void {
    this.#breaker.set(open ? 1 : 0)
  }

  recordFallback(mode: 'open' | 'closed' | 'local'): void {
    this.#fallbacks.inc({ mode })
  }

  recordReload(result: 'success' | 'error', ruleCount?: number): void {
    this.#reloads.inc({ result })
    if (ruleCount !== undefined) this.#rules.set(ruleCount)
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
  return { labels: { rule }, total: 0, over: 0, near: 0, within: 0, shadow: 0, denyCache: 0 }
}

/** Adds a rule's pending hits of one kind to its counter; a kind with none adds no series, as before any hit. */
function moveHits(counter: Counter<'rule'>, pending: PendingHits, field: PendingField): void {
  const hits = pending[field]
  if (hits === 0) return
  pending[field] = 0
  counter.inc(pending.labels, hits)
}
