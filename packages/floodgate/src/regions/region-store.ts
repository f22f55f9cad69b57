// The Store a limiter uses in a region: the region's own store, with regional limits and usage counted for the sync loop.

import type { PolicyRecord } from '../core/evaluate.js'
import type { Policy } from '../core/policy.js'
import type {
  EvaluateRequest,
  EvaluateResponse,
  LeaseRequest,
  LeaseResponse,
  LeaseStore,
  MergeRequest,
  MergeResponse,
  Store,
  SubmitCallback,
} from '../stores/store.js'
import { usedByOthers } from './crdt.js'
import { isWindowed, regionalPolicy, windowOf, type RegionView } from './region-policy.js'
import { entryId } from './usage-tracker.js'
import { mergeUsageBatch, usageKey, type MergeItem } from './usage-script.js'
import { TickBatcher } from '../stores/redis/batcher.js'
import { claimNow, usageTtlMs, type RegionContext } from './replicator.js'
import { meterOf } from './hand-over.js'

/** Policies kept by name for peers' asks; a bound, as policies may come per call. */
const MAX_POLICIES = 10_000
/** Write-back senders (origin, key) whose last counted flush is remembered, so a resent flush counts once. */
const MAX_SENDERS = 100_000

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
  // The region's own store holds every key's records: its shards are this store's.
  readonly shardOf: Store['shardOf']
  readonly shards: Store['shards']
  /** Present when the region's store has it: `sync: 'lease'` and `'auto'` (see leaseAll). */
  readonly lease: LeaseStore['lease'] | undefined
  /** Present when the region's store has it: `sync: 'write-back'` (see mergeAll). */
  readonly merge: Store['merge']
  private readonly fetching = new Map<string, Promise<void>>()
  // The last flush seq counted per write-back sender and key: a flush resent after a lost answer counts once.
  private readonly flushed = new Map<string, number>()

  constructor(private readonly ctx: RegionContext) {
    const inner = ctx.store
    this.onRecovered = inner.onRecovered === undefined ? undefined : (listener) => inner.onRecovered!(listener)
    this.recover = inner.recover === undefined ? undefined : (shard) => inner.recover!(shard)
    this.shardOf = inner.shardOf === undefined ? undefined : (key) => inner.shardOf!(key)
    this.shards = inner.shards === undefined ? undefined : () => inner.shards!()
    const leaser = (inner as Partial<LeaseStore>).lease
    this.lease = typeof leaser === 'function' ? (batch) => this.leaseAll(inner as LeaseStore, batch) : undefined
    this.merge = typeof inner.merge === 'function' ? (batch) => this.mergeAll(inner.merge!.bind(inner), batch) : undefined
  }

  submit(request: EvaluateRequest, done: SubmitCallback): void {
    if (!request.policies.some(hasRegions)) {
      submitTo(this.ctx.store, request, done)
      return
    }
    const now = request.now ?? this.ctx.clock()
    // A copy that cannot be read is decided with what this process knows: the sync loop retries.
    const refreshing = this.refreshed(request.key, request.policies, now)
    if (refreshing === undefined) this.decide(request, now, done)
    else void refreshing.then(() => this.decide(request, now, done))
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
    const policies = this.regional(request.key, request.policies, now)
    submitTo(this.ctx.store, { ...request, policies, now }, (error, response) => {
      if (error == null && response !== undefined && request.cost > 0) {
        this.count(request.key, request.policies, request.cost, response.allowed ? request.cost : 0, now)
        if (!response.allowed) this.shortenSplitWaits(request.policies, response.results)
      }
      done(error, response)
    })
  }

  // The policies the region's store decides with at `now` (see region-policy.ts).
  private regional(key: string, policies: readonly Policy[], now: number): readonly Policy[] {
    if (!policies.some(hasRegionalLimit)) return policies
    return policies.map((policy) =>
      hasRegionalLimit(policy)
        ? regionalPolicy(policy, policy.regions!, this.viewOf(key, policy, now), this.ctx.regions, this.ctx.region, now)
        : policy,
    )
  }

  private viewOf(key: string, policy: Policy, now: number): RegionView {
    const window = windowOf(now, policy.periodMs)
    return {
      current: this.ctx.views.fields(entryId(key, policy, window)),
      previous: this.ctx.views.fields(entryId(key, policy, window - 1)),
    }
  }

  // Brings the copies the request's regional policies need up to date (see staleIds); never rejects.
  private refreshed(key: string, policies: readonly Policy[], now: number): Promise<void> | undefined {
    const stale = this.staleIds(key, policies, now)
    if (stale === undefined) return undefined
    return Promise.all(stale.map(([id, policy, window]) => this.fetch(id, key, policy, window, now))).then(
      () => undefined,
      () => undefined,
    )
  }

  /**
   * Lease calls decide against the regional limits as decisions do: in split mode a region's
   * leases are drawn from its allotment (and a hand-over competes with them in the same store, so
   * the allotments still bound the total); in shared mode from the limit less what the others
   * used, and bucket leases see the others' use charged into the state by the ticks. What a lease
   * takes counts as the region's use at once (its units are charged, or for GCRA reserved, in the
   * region's store from then on); units returned unused stay counted for the others until the
   * window ends: under-admission by at most what was returned, never over-admission.
   */
  private leaseAll(inner: LeaseStore, batch: readonly LeaseRequest[]): Promise<LeaseResponse[]> {
    return Promise.all(batch.map((request) => this.leaseOne(inner, request)))
  }

  private async leaseOne(inner: LeaseStore, request: LeaseRequest): Promise<LeaseResponse> {
    if (!request.policies.some(hasRegions)) return (await inner.lease([request]))[0]
    const now = request.now ?? this.ctx.clock()
    await this.refreshed(request.key, request.policies, now)
    if (request.need > 0) {
      // A bucket's copy of the others' use is its own state: charged before the block is drawn from it.
      const buckets = request.policies.filter((policy) => policy.regions === 'shared' && !isWindowed(policy.algorithm))
      await Promise.all(buckets.map((policy) => claimNow(this.ctx, request.key, policy, now).catch(() => undefined)))
    }
    const policies = this.regional(request.key, request.policies, now)
    const [answer] = await inner.lease([{ ...request, policies, now }])
    const need = Math.max(0, request.need)
    const taken = !answer.allowed ? 0 : request.id !== 0 && answer.granted > 0 ? answer.granted : need
    if (need > 0 || taken > 0) this.count(request.key, request.policies, Math.max(need, taken), taken, now)
    if (!answer.allowed) this.shortenSplitWaits(request.policies, answer.results)
    return answer
  }

  /**
   * Write-back flushes: the units instances admitted are charged into the region's store (a merge
   * is a forced charge, whatever the limit) and counted as the region's use; a flush resent with
   * the same (origin, seq) counts once. The answer each instance takes as its copy is the region's
   * record with the others' use of a shared window added in, so an instance deciding from it
   * against the whole limit admits what the regional limit allows. Buckets need nothing here: the
   * ticks charge the others' use into the region's own state, and the copy reads it from there.
   */
  private async mergeAll(merge: NonNullable<Store['merge']>, batch: readonly MergeRequest[]): Promise<MergeResponse[]> {
    if (!batch.some((request) => request.policies.some(hasRegions))) return merge(batch)
    const now = this.ctx.clock()
    const requests = batch.map((request) => (request.policies.some(hasRegions) ? { ...request, now: request.now ?? now } : request))
    await Promise.all(requests.map((request) => this.refreshed(request.key, request.policies, request.now ?? now)))
    for (const request of requests) if (request.units > 0 && request.policies.some(hasRegions)) this.countFlush(request, request.now ?? now)
    const responses = await merge(requests)
    return responses.map((response, i) => {
      const request = requests[i]
      if (!request.policies.some(isSharedWindow)) return response
      // (Split is refused with write-back: core/regions.ts says why.)
      const records = response.records.map((record, j) => {
        const policy = request.policies[j]
        return isSharedWindow(policy) ? this.asSeenWhole(record, policy, request.key, response.now) : record
      })
      return { ...response, records }
    })
  }

  // Counts a flush's units once per (origin, seq): a resend after a lost answer is not new use.
  // Counted before the store answers, so a flush whose answer is lost still counts (at most once).
  private countFlush(request: MergeRequest, now: number): void {
    if (request.origin !== undefined && request.seq !== undefined) {
      const sender = `${request.origin}\u0000${request.key}\u0000${request.policies[0].name}`
      const last = this.flushed.get(sender)
      if (last !== undefined && request.seq <= last) return
      this.flushed.delete(sender)
      if (this.flushed.size >= MAX_SENDERS) this.flushed.delete(this.flushed.keys().next().value!)
      this.flushed.set(sender, request.seq)
    }
    this.count(request.key, request.policies, request.units, request.units, now)
  }

  // A shared window's record as if one store held every region's use: the others' use heard so
  // far is added to the counts (the current window's and, for a sliding window, the previous one's).
  private asSeenWhole(record: PolicyRecord, policy: Policy, key: string, now: number): PolicyRecord {
    const periodMs = policy.periodMs
    const windowStart = windowOf(now, periodMs) * periodMs
    const state = record.state
    let own = 0
    let ownPrevious = 0
    if (state !== undefined) {
      // A record of a later window (another process's clock ahead of this one) is left as it is.
      if (state[0] > windowStart) return record
      if (state[0] === windowStart) {
        own = state[1]
        ownPrevious = state[2] ?? 0
      } else if (state[0] === windowStart - periodMs) {
        ownPrevious = state[1]
      }
    }
    const view = this.viewOf(key, policy, now)
    const others = usedByOthers(view.current, this.ctx.region)
    if (policy.algorithm === 'fixed-window') return { blockedUntil: record.blockedUntil, state: [windowStart, own + others] }
    const othersPrevious = usedByOthers(view.previous, this.ctx.region)
    return { blockedUntil: record.blockedUntil, state: [windowStart, own + others, ownPrevious + othersPrevious] }
  }

  // A split allotment can grow at the next tick (a peer hands units over), so a denial's wait is
  // at most one interval: a deny cache or a client waiting longer would leave those units unused,
  // and the region's demand, which tells peers to hand them over, would go unseen.
  private shortenSplitWaits(policies: readonly Policy[], results: readonly EvaluateResponse['results'][number][]): void {
    const cap = this.ctx.intervalMs
    for (let i = 0; i < policies.length; i++) {
      const result = results[i]
      if (policies[i].regions === 'split' && !result.allowed && result.retryAfterMs > cap) result.retryAfterMs = cap
    }
  }

  // Counts what a request asked for and what was charged for it, per regional policy.
  private count(key: string, policies: readonly Policy[], asked: number, admitted: number, now: number): void {
    for (const policy of policies) if (policy.regions !== undefined) this.countOne(key, policy, asked, admitted, now)
  }

  private countOne(key: string, policy: Policy, asked: number, admitted: number, now: number): void {
    const { ctx } = this
    if (!ctx.policies.has(policy.name)) {
      if (ctx.policies.size >= MAX_POLICIES) ctx.policies.delete(ctx.policies.keys().next().value!)
      ctx.policies.set(policy.name, policy)
    }
    const entry = ctx.tracker.entry(key, policy, windowOf(now, policy.periodMs))
    if (entry === undefined) {
      ctx.counters.lost++
      return
    }
    // Split: the demand meter's first sample is the copy before this request's demand (hand-over.ts).
    if (policy.regions === 'split' && entry.meter === undefined) meterOf(ctx, entry, now)
    ctx.tracker.count(entry, asked, admitted)
  }

  /**
   * The limiter answered `cost` for `key` from its deny cache (a denial this store made, still in
   * force): no store call, but still demand, which is what moves split allotments to this region.
   * Counted as asked and not admitted, like the denial it repeats: a lookup and two additions.
   */
  noteDenied(key: string, policies: readonly Policy[], cost: number): void {
    if (cost <= 0) return
    for (const policy of policies) if (policy.regions === 'split') this.countOne(key, policy, cost, 0, this.ctx.clock())
  }

  // Copies a decision needs that are missing or older than two intervals and a tick: the current
  // window's, and the previous one's for a shared sliding window (its weight still counts).
  private staleIds(key: string, policies: readonly Policy[], now: number): [string, Policy, number][] | undefined {
    let stale: [string, Policy, number][] | undefined
    // A tick refreshes the copies of every key decided since the one before; one that runs long
    // (many keys) must not send every decision to Redis for its copy meanwhile.
    const oldest = now - 2 * this.ctx.intervalMs - this.ctx.lastTickMs
    for (const policy of policies) {
      // A bucket decides on its own state, into which the ticks charge what other regions used.
      if (policy.regions === undefined || !isWindowed(policy.algorithm)) continue
      const window = windowOf(now, policy.periodMs)
      const first = policy.regions === 'shared' && policy.algorithm === 'sliding-window' ? window - 1 : window
      for (let w = first; w <= window; w++) {
        const id = entryId(key, policy, w)
        const at = this.ctx.views.refreshedAt(id)
        if (at === undefined || at < oldest) (stale ??= []).push([id, policy, w])
      }
    }
    return stale
  }

  // Reads one copy from the region's Redis; concurrent decisions of one key share the read, and the
  // reads of one event-loop turn go as one batch (64 hashes a script call), as decisions do.
  private fetch(id: string, key: string, policy: Policy, window: number, now: number): Promise<void> {
    let pending = this.fetching.get(id)
    if (pending === undefined) {
      const { ctx } = this
      const item: MergeItem = {
        hashKey: usageKey(ctx.prefix, key, policy, window),
        merge: {
          region: ctx.region,
          origin: '',
          entries: [],
          fields: EMPTY_FIELDS,
          claim: false,
          ttlMs: usageTtlMs(policy, window, now, ctx.intervalMs),
        },
      }
      pending = new Promise<void>((resolve, reject) => this.reads.add({ id, item, resolve, reject }))
      this.fetching.set(id, pending)
    }
    return pending
  }

  private readonly reads = new TickBatcher<Read>((reads) => {
    const { ctx } = this
    mergeUsageBatch(
      ctx.local,
      ctx.region,
      reads.map((read) => read.item),
    ).then(
      (replies) => {
        const at = ctx.clock()
        reads.forEach((read, i) => {
          this.fetching.delete(read.id)
          ctx.views.merge(read.id, replies[i].fields, at)
          read.resolve()
        })
      },
      (error: unknown) => {
        for (const read of reads) {
          this.fetching.delete(read.id)
          read.reject(error)
        }
      },
    )
  })
}

/** One copy to read, and who waits for it. */
interface Read {
  readonly id: string
  readonly item: MergeItem
  readonly resolve: () => void
  readonly reject: (error: unknown) => void
}

const EMPTY_FIELDS: ReadonlyMap<string, number> = new Map()

function hasRegions(policy: Policy): boolean {
  return policy.regions !== undefined
}

function isSharedWindow(policy: Policy): boolean {
  return policy.regions === 'shared' && isWindowed(policy.algorithm)
}

// A windowed policy with regions: decided with a regional limit (buckets see the others' use in their state).
function hasRegionalLimit(policy: Policy): boolean {
  return policy.regions !== undefined && isWindowed(policy.algorithm)
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
