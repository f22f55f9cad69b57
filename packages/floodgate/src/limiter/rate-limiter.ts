// The RateLimiter: decides keys against a policy set on a store, with modes, shadow policies,
// a deny cache, leases, and failure handling (timeout, circuit breaker, open/closed/local).

import { EventEmitter } from 'node:events'
import { FloodgateError } from '../core/errors.js'
import { createEvaluation, type PolicyResult } from '../core/evaluate.js'
import type { Policy } from '../core/policy.js'
import { MemoryStore } from '../stores/memory/memory-store.js'
import type { EvaluateRequest, EvaluateResponse, Store, SubmitCallback } from '../stores/store.js'
import { CircuitBreaker } from './circuit-breaker.js'
import { fromDenyCache, toDecision, toFallbackDecision, toNeverDecision, toPoolDenial } from './decisions.js'
import { DenyCache } from './deny-cache.js'
import { resolveOptions, type ResolvedOptions } from './options.js'
import { createPlan, planSignature, type PolicyPlan, type Tier } from './policy-plan.js'
import { checkCost, checkKey, checkLease } from './requests.js'
import { Timeouts } from './timeout.js'
import type { Decision, DecisionSource, Lease, LimitOptions, RateLimiterEvents, RateLimiterOptions } from './types.js'

/** A remembered denial and the cost it was for: a smaller cost might pass, so only the same cost hits. */
interface CachedDenial {
  decision: Decision
  cost: number
}

/** Where a decision's state lives: the configured store, or the local fallback store. */
type Backend = 'remote' | 'local'

/** What release() needs to hand a lease back where it was taken. */
interface LeaseOrigin {
  plan: PolicyPlan
  backend: Backend
  policies: Policy[]
  released: boolean
}

/**
 * Decides requests for keys: `await limiter.limit('user:42')`. Every policy of the set is decided
 * together, all-or-nothing. Emits 'store-error', 'breaker-open', 'breaker-close', 'fallback' and,
 * while something listens to it, 'decision'.
 *
 * Shadow policies: the whole set is decided in one store call. If it denied only because of shadow
 * policies, the enforced policies are decided again alone and the answer is theirs; the shadow
 * policies then stay uncharged, exactly as a denial would leave them had they been enforced.
 *
 * Elastic policies: the store decides with each elastic policy scaled to its ceiling; an admission
 * past the nominal limit must also be admitted by the shared pool, else the key's charge is
 * refunded and the request denied. Charge, pool and refund are separate steps, not one atomic
 * one: between them, concurrent requests for the key see the charge (they may be denied a little
 * early, never admitted past the ceiling).
 *
 * Deny cache: a store denial with a wait is remembered per (key, policy set, cost) and answered
 * in-process until the wait ends. Not remembered: denials by a concurrency policy (a release
 * elsewhere may free a slot early), pool denials (the pool moves with other keys), fallback
 * decisions and peeks. refund/reset/release clear the key's entry here; a refund made by another
 * process is not seen before the wait ends (the same trade as envoyproxy/ratelimit's local cache).
 */
export class RateLimiter extends EventEmitter<RateLimiterEvents> {
  readonly store: Store
  private readonly options: ResolvedOptions
  private readonly ownsStore: boolean
  // The embedded store answers synchronously and cannot time out: it skips the promise, the timeout and the breaker.
  private readonly inProcess: MemoryStore | undefined
  private readonly clock: () => number
  private readonly breaker: CircuitBreaker
  private readonly timeouts: Timeouts
  private readonly denyCache: DenyCache<CachedDenial> | undefined
  private readonly ownPlan: PolicyPlan | undefined
  private readonly plans = new WeakMap<readonly Policy[], PolicyPlan>()
  // Plans by content, for callers that pass an equal set in a new array each time (bounded).
  private readonly plansBySignature = new Map<string, PolicyPlan>()
  private readonly leases = new WeakMap<Lease, LeaseOrigin>()
  private planCount = 0
  private localStore: MemoryStore | undefined
  // What in-process stores decide into; read into a Decision before anything else decides.
  private readonly evaluation = createEvaluation()
  private readonly stopWatchingStore: (() => void) | undefined
  // Whether 'decision' has listeners, kept as a field so an unwatched limit() pays one boolean check.
  private observed = false

  constructor(options: RateLimiterOptions = {}) {
    super()
    this.options = resolveOptions(options)
    this.clock = this.options.clock
    this.ownsStore = this.options.store === undefined
    this.store = this.options.store ?? new MemoryStore({ clock: this.clock })
    this.inProcess = this.store instanceof MemoryStore ? this.store : undefined
    this.breaker = new CircuitBreaker(this.options.breakerFailures, this.options.breakerCooldownMs)
    this.timeouts = new Timeouts(this.options.timeoutMs)
    this.denyCache = this.options.denyCacheMaxKeys > 0 ? new DenyCache(this.options.denyCacheMaxKeys) : undefined
    if (this.options.policies !== undefined) this.ownPlan = createPlan(this.options.policies, this.options.instances, '')
    this.stopWatchingStore = this.store.onRecovered?.(() => this.breaker.probeNow())
    // 'newListener' and 'removeListener' are EventEmitter's own events, outside RateLimiterEvents.
    const emitter = this as EventEmitter
    emitter.on('newListener', (event: string | symbol) => {
      if (event === 'decision') this.observed = true
    })
    emitter.on('removeListener', (event: string | symbol) => {
      if (event === 'decision') this.observed = this.listenerCount('decision') > 0
    })
  }

  /** The limiter's own validated policies (empty when every call passes its own). */
  get policies(): readonly Policy[] {
    return this.ownPlan?.policies ?? []
  }

  /**
   * Decides one request for `key` and charges `cost` (default 1) if every policy admits it; cost 0
   * peeks. Rejects only for invalid arguments: store failures become the configured failure mode.
   */
  limit(key: string, options?: LimitOptions): Promise<Decision> {
    return this.observed ? this.limitObserved(key, options) : this.decide(key, options)
  }

  /** limit() with its answer reported as a 'decision' event. */
  private limitObserved(key: string, options: LimitOptions | undefined): Promise<Decision> {
    const started = performance.now()
    return this.decide(key, options).then((decision) => {
      this.emit('decision', key, decision, options?.cost ?? 1, performance.now() - started)
      return decision
    })
  }

  private decide(key: string, options: LimitOptions | undefined): Promise<Decision> {
    try {
      checkKey(key)
      const cost = options?.cost === undefined ? 1 : checkCost(options.cost, 0)
      const plan = this.planFor(options?.policies)
      if (cost > plan.maxCost) return this.neverAdmitted(key, cost, plan)
      if (cost > 0 && this.denyCache !== undefined && this.denyCache.size > 0) {
        const now = this.clock()
        const hit = this.denyCache.get(plan.cacheTag === '' ? key : plan.cacheTag + key, plan, now)
        if (hit !== undefined && hit.value.cost === cost) return Promise.resolve(fromDenyCache(hit.value.decision, hit.until, now))
      }
      // Read before the store decides, so a lease's expiry is never estimated later than the store's.
      const startedAt = plan.hasConcurrency ? this.clock() : 0
      if (this.inProcess === undefined) return this.decideRemotely(key, cost, plan, startedAt)
      const decision = this.decideOn(this.inProcess, plan.remote, 'store', key, cost, plan)
      if (cost > 0 && plan.hasElastic && elasticOver(plan, decision)) return this.confirmWithPool(key, cost, plan, 'remote', decision, startedAt)
      return Promise.resolve(this.finish(key, cost, plan, 'remote', decision, true, startedAt))
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /** The key's current state without charging it (a peek: `limit` with cost 0). */
  get(key: string, options?: Omit<LimitOptions, 'cost'>): Promise<Decision> {
    return this.limit(key, { policies: options?.policies, cost: 0 })
  }

  /**
   * Gives `cost` units back to `key` on every policy of the set (e.g. the request turned out not to
   * count). Store failures do not reject: they are reported with 'store-error' (and applied to the
   * local store in 'local' mode).
   */
  async refund(key: string, cost: number, options?: Omit<LimitOptions, 'cost'>): Promise<void> {
    checkKey(key)
    checkCost(cost, 1)
    const plan = this.planFor(options?.policies)
    this.forgetDenial(key, plan)
    const response = await this.evaluateRemote(key, plan.remote.policies, -cost)
    // The units may have been charged locally while the store was away: give them back there.
    if (response === undefined && this.options.onStoreError === 'local') this.local().evaluateOne(key, plan.local.policies, -cost)
  }

  /** Forgets every counter and block of `key` for the set (in the store and the local fallback). */
  async reset(key: string, options?: Omit<LimitOptions, 'cost'>): Promise<void> {
    checkKey(key)
    const plan = this.planFor(options?.policies)
    this.forgetDenial(key, plan)
    await this.localStore?.reset(key, plan.local.policies)
    await this.guard(() => this.store.reset(key, plan.remote.policies))
  }

  /**
   * Hands a concurrency lease back: its cost is refunded on its concurrency policies only. A second
   * release does nothing, nor does releasing a lease past its period: it has expired by itself, and
   * a refund would free a slot someone else holds now (the state does not know whose slot is whose).
   */
  async release(lease: Lease): Promise<void> {
    checkLease(lease)
    let origin = this.leases.get(lease)
    if (origin === undefined) origin = this.foreignLease(lease)
    if (origin.released) return
    origin.released = true
    this.forgetDenial(lease.key, origin.plan)
    const now = this.clock()
    const live = lease.acquiredAt === undefined ? origin.policies : origin.policies.filter((policy) => now < lease.acquiredAt! + policy.periodMs)
    if (live.length > 0) await this.evaluateOn(origin.backend, lease.key, live, -lease.cost)
  }

  /** Closes the store if the limiter created it, and the local fallback store. */
  async close(): Promise<void> {
    this.stopWatchingStore?.()
    await this.localStore?.close()
    if (this.ownsStore) await this.store.close()
  }

  private planFor(policies: readonly Policy[] | undefined): PolicyPlan {
    if (policies === undefined) {
      if (this.ownPlan === undefined) {
        throw new FloodgateError('INVALID_REQUEST', 'policies: this limiter has no policies of its own; pass them to the constructor or to each call')
      }
      return this.ownPlan
    }
    let plan = this.plans.get(policies)
    if (plan === undefined) {
      if (!Array.isArray(policies) || policies.length === 0) {
        throw new FloodgateError('INVALID_REQUEST', 'policies: give at least one policy (validated with createPolicies)')
      }
      if (this.options.pool === undefined && policies.some((policy) => policy.mode === 'elastic')) {
        throw new FloodgateError('INVALID_OPTION', 'pool: elastic policies need a shared pool: pass pool: { limiter } to the RateLimiter')
      }
      const signature = planSignature(policies)
      plan = this.plansBySignature.get(signature)
      if (plan === undefined) {
        // The tag keeps deny-cache entries of different sets for one key apart.
        plan = createPlan(policies, this.options.instances, `\u0000${++this.planCount}\u0000`)
        this.plansBySignature.set(signature, plan)
        if (this.plansBySignature.size > MAX_PLANS) this.plansBySignature.delete(this.plansBySignature.keys().next().value!)
      }
      this.plans.set(policies, plan)
    }
    return plan
  }

  /**
   * A cost above what some enforced policy of the set could ever admit is decided from the policies
   * alone (a property of policy and cost, the same for every algorithm): the key is only peeked, so
   * nothing is charged, no block period starts and no algorithm is asked for a wait that does not exist.
   */
  private neverAdmitted(key: string, cost: number, plan: PolicyPlan): Promise<Decision> {
    const peeked = this.inProcess === undefined
      ? this.decideRemotely(key, 0, plan, 0)
      : Promise.resolve(this.decideOn(this.inProcess, plan.remote, 'store', key, 0, plan))
    return peeked.then((decision) => toNeverDecision(plan, decision, cost))
  }

  /** Decides synchronously on an in-process store (the embedded store, or the local fallback). */
  private decideOn(store: MemoryStore, tier: Tier, source: DecisionSource, key: string, cost: number, plan: PolicyPlan): Decision {
    const first = store.evaluateInto(key, tier.policies, cost, this.evaluation)
    if (first.allowed || !plan.hasShadow || cost === 0 || !onlyShadowDenied(plan, first.results)) {
      return toDecision(plan, tier, first.results, first.allowed, source)
    }
    // The second call overwrites the evaluation: keep copies of the first results.
    const firstResults = first.results.map((result) => ({ ...result }))
    const second = store.evaluateInto(key, tier.enforced, cost, this.evaluation)
    return toDecision(plan, tier, mergeShadow(plan, firstResults, second.results), second.allowed, source)
  }

  // One promise per decision, answered from the store's callback (Store.submit; a store without
  // it is adapted, see submitRemote). Anonymous closures only: tsx (keepNames) wraps a named one
  // in a defineProperty each time it is made.
  private decideRemotely(key: string, cost: number, plan: PolicyPlan, startedAt: number): Promise<Decision> {
    if (!this.breaker.allows(this.clock())) return RESOLVED_UNDEFINED.then(() => this.decideFrom(undefined, key, cost, plan, startedAt))
    return new Promise<Decision>((resolve, reject) => {
      // The first of the store's answer and the timeout decides; the other finds the entry settled.
      const entry = this.timeouts.start((timeout) => resolve(this.answerRemote(timeout, undefined, key, cost, plan, startedAt)))
      // The deadline lets the store skip the charge once the timeout has answered the caller.
      const request = { key, policies: plan.remote.policies, cost, deadline: entry.deadline }
      try {
        this.submitRemote(request, (error, response) => {
          if (this.timeouts.settle(entry)) resolve(this.answerRemote(error, response, key, cost, plan, startedAt))
        })
      } catch (error) {
        if (this.timeouts.settle(entry)) resolve(this.answerRemote(error, undefined, key, cost, plan, startedAt))
      }
    })
  }

  private submitRemote(request: EvaluateRequest, done: SubmitCallback): void {
    if (this.store.submit !== undefined) return this.store.submit(request, done)
    this.store.evaluate([request]).then(
      (responses) => done(null, responses[0]),
      (error: unknown) => done(error),
    )
  }

  // A submitted request's answer (or failure, or timeout) as the decision, or a rejected promise if
  // deciding throws (a listener of the limiter's events may): the store's callback must not throw.
  private answerRemote(error: unknown, response: EvaluateResponse | undefined, key: string, cost: number, plan: PolicyPlan, startedAt: number): Decision | Promise<Decision> {
    try {
      if (error == null && response !== undefined) {
        this.storeAnswered()
        return this.decideFrom(response, key, cost, plan, startedAt)
      }
      const failure = error ?? new Error('the store called done() with neither a response nor an error; a Store.submit must call done(null, response) or done(error)')
      return this.decideFrom(this.storeFailed(failure), key, cost, plan, startedAt)
    } catch (thrown) {
      return Promise.reject(thrown)
    }
  }

  // The rest of decideRemotely once the store answered the whole set (`first`; undefined: it failed).
  // Synchronous unless a shadow denial or an elastic admission needs another call.
  private decideFrom(first: EvaluateResponse | undefined, key: string, cost: number, plan: PolicyPlan, startedAt: number): Decision | Promise<Decision> {
    if (first === undefined) return this.fallback(key, cost, plan, startedAt)
    if (!first.allowed && plan.hasShadow && cost !== 0 && onlyShadowDenied(plan, first.results)) return this.decideEnforced(first, key, cost, plan, startedAt)
    return this.admitRemote(toDecision(plan, plan.remote, first.results, first.allowed, 'store'), key, cost, plan, startedAt)
  }

  // Only shadow policies denied: the enforced ones are decided again alone, and the answer is theirs.
  private async decideEnforced(first: EvaluateResponse, key: string, cost: number, plan: PolicyPlan, startedAt: number): Promise<Decision> {
    const tier = plan.remote
    const second = await this.evaluateRemote(key, tier.enforced, cost)
    if (second === undefined) return this.fallback(key, cost, plan, startedAt)
    return this.admitRemote(toDecision(plan, tier, mergeShadow(plan, first.results, second.results), second.allowed, 'store'), key, cost, plan, startedAt)
  }

  private admitRemote(decision: Decision, key: string, cost: number, plan: PolicyPlan, startedAt: number): Decision | Promise<Decision> {
    if (cost > 0 && plan.hasElastic && elasticOver(plan, decision)) return this.confirmWithPool(key, cost, plan, 'remote', decision, startedAt)
    return this.finish(key, cost, plan, 'remote', decision, true, startedAt)
  }

  /**
   * An elastic admission past the nominal limit stands only if the shared pool admits it too;
   * otherwise the key's charge is refunded and the request denied for the pool's wait. A failing
   * pool counts as no spare capacity: elastic headroom is granted only when confirmed.
   */
  private async confirmWithPool(
    key: string,
    cost: number,
    plan: PolicyPlan,
    backend: Backend,
    admitted: Decision,
    startedAt: number,
  ): Promise<Decision> {
    const pool = this.options.pool!
    let poolDecision: Decision | undefined
    try {
      poolDecision = await pool.limiter.limit(pool.key ?? 'elastic-pool', { cost })
    } catch (error) {
      this.emit('store-error', asError(error))
    }
    if (poolDecision?.allowed) return this.finish(key, cost, plan, backend, admitted, true, startedAt)
    const tier = backend === 'local' ? plan.local : plan.remote
    const refund = await this.evaluateOn(backend, key, tier.policies, -cost)
    const afterRefund = refund === undefined ? undefined : toDecision(plan, tier, refund.results, false, admitted.source)
    const denial = toPoolDenial(plan, admitted, afterRefund, Math.max(1, poolDecision?.retryAfterMs ?? 1))
    // The pool's state changes with every other key: its denial is not remembered in the deny cache.
    return this.finish(key, cost, plan, backend, denial, false, startedAt)
  }

  /** Attaches a lease to admitted requests with concurrency policies, and remembers store denials. */
  private finish(
    key: string,
    cost: number,
    plan: PolicyPlan,
    backend: Backend,
    decision: Decision,
    cacheable: boolean,
    startedAt: number,
  ): Decision {
    if (cost === 0) return decision
    if (decision.allowed) {
      if (plan.hasConcurrency) this.attachLease(key, cost, plan, backend, decision, startedAt)
    } else if (cacheable && this.denyCache !== undefined && decision.source === 'store' && decision.retryAfterMs > 0 && !deniedByConcurrency(plan, decision)) {
      const cacheKey = plan.cacheTag === '' ? key : plan.cacheTag + key
      this.denyCache.set(cacheKey, plan, this.clock() + decision.retryAfterMs, { decision, cost })
    }
    return decision
  }

  private attachLease(key: string, cost: number, plan: PolicyPlan, backend: Backend, decision: Decision, acquiredAt: number): void {
    const tier = backend === 'local' ? plan.local : plan.remote
    const policies: Policy[] = []
    for (let i = 0; i < plan.policies.length; i++) {
      const policy = plan.policies[i]
      // After a shadow denial only the enforced policies were charged, so only they hold a slot.
      if (policy.algorithm === 'concurrency' && !(decision.shadow && policy.shadow)) policies.push(tier.policies[i])
    }
    if (policies.length === 0) return
    const lease: Lease = Object.freeze({ key, cost, policies: Object.freeze(policies.map((policy) => policy.name)), acquiredAt })
    this.leases.set(lease, { plan, backend, policies, released: false })
    decision.lease = lease
  }

  /** A lease this limiter did not hand out (e.g. one that crossed a process boundary): resolved by name against the limiter's own policies. */
  private foreignLease(lease: Lease): LeaseOrigin {
    const plan = this.ownPlan
    if (plan === undefined) throw new FloodgateError('INVALID_REQUEST', 'lease: not issued by this limiter, and the limiter has no policies of its own to resolve it')
    const policies = lease.policies.map((name) => {
      const at = plan.policies.findIndex((policy) => policy.name === name && policy.algorithm === 'concurrency')
      if (at < 0) throw new FloodgateError('INVALID_REQUEST', `lease.policies: no concurrency policy named ${JSON.stringify(name)} in this limiter`)
      return plan.remote.policies[at]
    })
    return { plan, backend: 'remote', policies, released: false }
  }

  /** The decision when the store failed or the breaker is open: the configured failure mode. */
  private fallback(key: string, cost: number, plan: PolicyPlan, startedAt: number): Decision | Promise<Decision> {
    let decision: Decision
    const mode = this.options.onStoreError
    if (mode === 'open') {
      decision = toFallbackDecision(plan, true, 0, 'fallback-open')
    } else if (mode === 'closed') {
      const wait = this.breaker.isOpen ? this.breaker.waitMs(this.clock()) : this.breaker.cooldownMs
      decision = toFallbackDecision(plan, false, wait, 'fallback-closed')
    } else {
      decision = this.decideOn(this.local(), plan.local, 'fallback-local', key, cost, plan)
    }
    this.emit('fallback', decision.source)
    if (mode === 'local') {
      if (cost > 0 && plan.hasElastic && elasticOver(plan, decision)) return this.confirmWithPool(key, cost, plan, 'local', decision, startedAt)
      return this.finish(key, cost, plan, 'local', decision, false, startedAt)
    }
    return decision
  }

  private local(): MemoryStore {
    this.localStore ??= new MemoryStore({ clock: this.clock })
    return this.localStore
  }

  private forgetDenial(key: string, plan: PolicyPlan): void {
    this.denyCache?.delete(plan.cacheTag === '' ? key : plan.cacheTag + key)
  }

  private async evaluateOn(backend: Backend, key: string, policies: readonly Policy[], cost: number): Promise<EvaluateResponse | undefined> {
    return backend === 'local' ? this.local().evaluateOne(key, policies, cost) : this.evaluateRemote(key, policies, cost)
  }

  /** One request to the store, bounded by the timeout and the breaker; undefined when it failed or was skipped. */
  private evaluateRemote(key: string, policies: readonly Policy[], cost: number): Promise<EvaluateResponse | undefined> {
    if (this.inProcess !== undefined) return Promise.resolve(this.inProcess.evaluateOne(key, policies, cost))
    return this.guard(() => this.store.evaluate([{ key, policies, cost }])).then(firstResponse)
  }

  // A store call other than a decision's own (refunds, shadow re-decisions, resets), bounded by the
  // timeout and the breaker like decideRemotely's.
  private guard<T>(call: () => Promise<T>): Promise<T | undefined> {
    if (this.inProcess !== undefined) return call()
    if (!this.breaker.allows(this.clock())) return RESOLVED_UNDEFINED
    let pending: Promise<T>
    try {
      pending = call()
    } catch (error) {
      return Promise.resolve(this.storeFailed(error))
    }
    return this.timeouts.run(pending).then((value) => {
      this.storeAnswered()
      return value
    }, (error: unknown) => this.storeFailed(error))
  }

  private storeAnswered(): void {
    if (this.breaker.recordSuccess() === 'closed') this.emit('breaker-close')
  }

  private storeFailed(error: unknown): undefined {
    this.emit('store-error', asError(error))
    const transition = this.breaker.recordFailure(this.clock())
    if (this.breaker.isOpen) this.store.recover?.()
    if (transition === 'opened') this.emit('breaker-open')
    return undefined
  }
}

const RESOLVED_UNDEFINED = Promise.resolve(undefined)

function firstResponse(responses: EvaluateResponse[] | undefined): EvaluateResponse | undefined {
  return responses?.[0]
}

/** Most policy sets remembered by content; past it the oldest is forgotten (and rebuilt if it returns). */
const MAX_PLANS = 1_000

/**
 * True when an enforced elastic policy admitted past its nominal limit. Soft overage needs no pool,
 * and a shadow policy never denies, so its headroom is not confirmed with the pool either.
 */
function elasticOver(plan: PolicyPlan, decision: Decision): boolean {
  for (let i = 0; i < plan.policies.length; i++) {
    const policy = plan.policies[i]
    if (decision.policies[i].over && policy.mode === 'elastic' && !policy.shadow) return true
  }
  return false
}

/** True when the set denied and every denying policy is a shadow one. */
function onlyShadowDenied(plan: PolicyPlan, results: readonly PolicyResult[]): boolean {
  for (let i = 0; i < results.length; i++) {
    if (!results[i].allowed && !plan.policies[i].shadow) return false
  }
  return true
}

/** Shadow policies' results from the first call, enforced policies' from the second. */
function mergeShadow(plan: PolicyPlan, first: readonly PolicyResult[], enforced: readonly PolicyResult[]): PolicyResult[] {
  const merged = first.slice()
  const index = plan.enforcedIndex
  for (let j = 0; j < index.length; j++) merged[index[j]] = enforced[j]
  return merged
}

// A concurrency slot can be freed at any moment by a release elsewhere, so its wait is no promise.
function deniedByConcurrency(plan: PolicyPlan, decision: Decision): boolean {
  for (let i = 0; i < plan.policies.length; i++) {
    if (!decision.policies[i].allowed && plan.policies[i].algorithm === 'concurrency') return true
  }
  return false
}

function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error))
}
