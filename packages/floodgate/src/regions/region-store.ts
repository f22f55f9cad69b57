// The Store a limiter uses in a region: the region's own store, with regional limits and usage counted for the sync loop.

import type { Policy } from '../core/policy.js'
import type { EvaluateRequest, EvaluateResponse, Store, SubmitCallback } from '../stores/store.js'
import { isWindowed, regionalPolicy, windowOf, type RegionView } from './region-policy.js'
import { entryId } from './usage-tracker.js'
import { mergeUsage, usageKey } from './usage-script.js'
import { usageTtlMs, type RegionContext } from './replicator.js'

/** Policies kept by name for peers' asks; a bound, as policies may come per call. */
const MAX_POLICIES = 10_000

/**
 * Decides on the region's store. Policies without `regions` pass through untouched (and a request
 * with none of them goes straight to the store). A policy with `regions` is decided with its
 * regional limit (region-policy.ts), on this process's clock (so the window a decision counts in
 * is the window its usage is recorded in), and what it asked and admitted is counted for the next
 * tick. Nothing crosses regions here: the usage copies it reads are kept fresh by the sync loop,
 * and a copy older than two intervals and a tick (a key not decided lately) is first read from the
 * region's own Redis.
 */
export class RegionStore implements Store {
  readonly onRecovered: Store['onRecovered']
  readonly recover: Store['recover']
  private readonly fetching = new Map<string, Promise<void>>()

  constructor(private readonly ctx: RegionContext) {
    const inner = ctx.store
    this.onRecovered = inner.onRecovered === undefined ? undefined : (listener) => inner.onRecovered!(listener)
    this.recover = inner.recover === undefined ? undefined : () => inner.recover!()
  }

  submit(request: EvaluateRequest, done: SubmitCallback): void {
    if (!request.policies.some(hasRegions)) {
      submitTo(this.ctx.store, request, done)
      return
    }
    const now = request.now ?? this.ctx.clock()
    const stale = this.staleIds(request, now)
    if (stale.length === 0) {
      this.decide(request, now, done)
      return
    }
    // A copy that cannot be read is decided with what this process knows: the sync loop retries.
    Promise.all(stale.map(([id, policy, window]) => this.fetch(id, request.key, policy, window, now))).then(
      () => this.decide(request, now, done),
      () => this.decide(request, now, done),
    )
  }

  evaluate(batch: readonly EvaluateRequest[]): Promise<EvaluateResponse[]> {
    return Promise.all(
      batch.map(
        (request) =>
          new Promise<EvaluateResponse>((resolve, reject) =>
            this.submit(request, (error, response) => (error == null && response ? resolve(response) : reject(error))),
          ),
      ),
    )
  }

  /** Resets the key in this region's store only: usage already counted stays counted in every region until its window ends. */
  reset(key: string, policies: readonly Policy[]): Promise<void> {
    return this.ctx.store.reset(key, policies)
  }

  /** The region's store belongs to the caller (and RegionSync.close stops the sync loop): nothing to release here. */
  async close(): Promise<void> {}

  private decide(request: EvaluateRequest, now: number, done: SubmitCallback): void {
    const { ctx } = this
    const policies = request.policies.map((policy) => {
      if (policy.regions === undefined || !isWindowed(policy.algorithm)) return policy
      const window = windowOf(now, policy.periodMs)
      const view: RegionView = {
        current: ctx.views.fields(entryId(request.key, policy, window)),
        previous: ctx.views.fields(entryId(request.key, policy, window - 1)),
      }
      return regionalPolicy(policy, policy.regions, view, ctx.regions, ctx.region, now)
    })
    submitTo(ctx.store, { ...request, policies, now }, (error, response) => {
      if (error == null && response !== undefined && request.cost > 0) {
        this.count(request, response.allowed, now)
        if (!response.allowed) this.shortenSplitWaits(request.policies, response)
      }
      done(error, response)
    })
  }

  // A split allotment can grow at the next tick (a peer hands units over), so a denial's wait is
  // at most one interval: a deny cache or a client waiting longer would leave those units unused,
  // and the region's demand, which tells peers to hand them over, would go unseen.
  private shortenSplitWaits(policies: readonly Policy[], response: EvaluateResponse): void {
    const cap = this.ctx.intervalMs
    for (let i = 0; i < policies.length; i++) {
      const result = response.results[i]
      if (policies[i].regions === 'split' && !result.allowed && result.retryAfterMs > cap) result.retryAfterMs = cap
    }
  }

  // Counts what the request asked for and, when admitted, charged, per regional policy.
  private count(request: EvaluateRequest, allowed: boolean, now: number): void {
    const { ctx } = this
    for (const policy of request.policies) {
      if (policy.regions === undefined) continue
      if (!ctx.policies.has(policy.name)) {
        if (ctx.policies.size >= MAX_POLICIES) ctx.policies.delete(ctx.policies.keys().next().value!)
        ctx.policies.set(policy.name, policy)
      }
      const counted = ctx.tracker.record(request.key, policy, windowOf(now, policy.periodMs), request.cost, allowed ? request.cost : 0)
      if (!counted) ctx.counters.lost++
    }
  }

  // Copies a decision needs that are missing or older than two intervals and a tick: the current
  // window's, and the previous one's for a shared sliding window (its weight still counts).
  private staleIds(request: EvaluateRequest, now: number): [string, Policy, number][] {
    const stale: [string, Policy, number][] = []
    // A tick refreshes the copies of every key decided since the one before; one that runs long
    // (many keys) must not send every decision to Redis for its copy meanwhile.
    const oldest = now - 2 * this.ctx.intervalMs - this.ctx.lastTickMs
    for (const policy of request.policies) {
      // A bucket decides on its own state, into which the ticks charge what other regions used.
      if (policy.regions === undefined || !isWindowed(policy.algorithm)) continue
      const window = windowOf(now, policy.periodMs)
      const windows = policy.regions === 'shared' && policy.algorithm === 'sliding-window' ? [window, window - 1] : [window]
      for (const w of windows) {
        const id = entryId(request.key, policy, w)
        const at = this.ctx.views.refreshedAt(id)
        if (at === undefined || at < oldest) stale.push([id, policy, w])
      }
    }
    return stale
  }

  // Reads one copy from the region's Redis; concurrent decisions of one key share the read.
  private fetch(id: string, key: string, policy: Policy, window: number, now: number): Promise<void> {
    let pending = this.fetching.get(id)
    if (pending === undefined) {
      const { ctx } = this
      pending = mergeUsage(ctx.local, usageKey(ctx.prefix, key, policy, window), {
        region: ctx.region,
        origin: '',
        entries: [],
        fields: new Map(),
        claim: false,
        ttlMs: usageTtlMs(policy, window, now, ctx.intervalMs),
      })
        .then((reply) => ctx.views.merge(id, reply.fields, ctx.clock()))
        .finally(() => this.fetching.delete(id))
      this.fetching.set(id, pending)
    }
    return pending
  }
}

function hasRegions(policy: Policy): boolean {
  return policy.regions !== undefined
}

function submitTo(store: Store, request: EvaluateRequest, done: SubmitCallback): void {
  if (store.submit !== undefined) {
    store.submit(request, done)
    return
  }
  store.evaluate([request]).then(
    (responses) => done(null, responses[0]),
    (error: unknown) => done(error),
  )
}
