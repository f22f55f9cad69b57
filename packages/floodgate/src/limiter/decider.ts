// Deciders: how one policy set (a plan) is decided. Today every plan is decided exactly, one store
// decision per request (sync mode `always`); `createDecider` is where a plan's sync mode picks its decider.

import type { EventEmitter } from 'node:events'
import type { PolicyResult } from '../core/evaluate.js'
import type { EvaluateResponse } from '../stores/store.js'
import { toDecision, toPoolDenial } from './decisions.js'
import type { Denials } from './deny-cache.js'
import { failedDecision, type LocalBackend } from './fallback.js'
import { asError, type Backend, type GuardedStore } from './guarded-store.js'
import type { Leases } from './leases.js'
import { askPool, elasticOver, mergeShadow, onlyShadowDenied, type Pool } from './modes.js'
import type { PolicyPlan } from './policy-plan.js'
import type { Decision, DecisionSource, OnStoreError, RateLimiterEvents } from './types.js'
import { WriteBackBackend } from './sync/write-back-backend.js'
import { LeaseBackend, type SourcedResponse } from './sync/lease-backend.js'
import type { LeaseEngines } from './sync/lease-engines.js'
import type { WriteBack } from './sync/write-back.js'

/** A decision, synchronous unless a store (or the pool) answers later. */
export type MaybeDecision = Decision | Promise<Decision>

/** Decides requests for one plan. The limiter resolves each policy set to one, once. */
export interface Decider {
  readonly plan: PolicyPlan
  /**
   * Decides `cost` units for `key` (0 peeks): every policy of the plan, all-or-nothing, in its
   * modes, with the failure mode when the store fails. `startedAt` is the limiter's clock read
   * before deciding (0 unless the plan holds leases). Attaches leases and remembers denials.
   */
  decide(key: string, cost: number, startedAt: number): MaybeDecision
  /** Why `decide` could answer with a promise (limitSync refuses then), or undefined when it never does. */
  whyNotSync(): string | undefined
  /** Gives `cost` units back to `key`. Never rejects for a store failure (reported as 'store-error'). */
  refund(key: string, cost: number): Promise<void>
  /** Forgets `key`'s state for the plan, wherever the decider keeps it. */
  reset(key: string): Promise<void>
}

/** What deciders share: the limiter's parts. */
export interface DeciderContext {
  readonly remote: GuardedStore
  readonly local: LocalBackend
  readonly onStoreError: OnStoreError
  readonly pool: Pool | undefined
  readonly leases: Leases
  readonly denials: Denials | undefined
  readonly events: EventEmitter<RateLimiterEvents>
  /** The limiter's write-back engine, made on first use by a `sync: 'write-back'` plan. */
  readonly writeBack: () => WriteBack
  /** The limiter's lease engines, made on first use by a `sync: 'lease'` or `'auto'` plan. */
  readonly leaseEngines: () => LeaseEngines
}

/** The decider for `plan`: the seam where a per-policy sync mode (lease, write-back) picks its own. */
export function createDecider(plan: PolicyPlan, context: DeciderContext): Decider {
  const sync = plan.policies[0].sync
  if (sync === 'lease' || sync === 'auto') {
    const engines = context.leaseEngines()
    return new ExactDecider(
      plan,
      context,
      sync === 'lease'
        ? new LeaseBackend(context.remote, engines.leases, engines.leases)
        : new LeaseBackend(context.remote, engines.auto, engines.leases, engines.auto),
    )
  }
  if (sync === 'write-back') {
    const backend = new WriteBackBackend(context.writeBack(), (error) => context.events.emit('store-error', error))
    return new ExactDecider(plan, context, backend)
  }
  return new ExactDecider(plan, context)
}

/**
 * One store decision per request. Shadow policies: the whole set is decided in one call; if it
 * denied only because of shadow policies, the enforced ones are decided again alone and the answer
 * is theirs. Elastic policies: an admission past the nominal limit stands only if the shared pool
 * admits it too, else the key's charge is refunded. Written once for stores that answer
 * synchronously and those that answer later: each step continues at once on a synchronous answer.
 */
export class ExactDecider implements Decider {
  /**
   * `primary` decides first (the store, or write-back's local copies); the failure mode takes over
   * when it answers undefined.
   */
  // Why the primary could answer later, fixed for the decider's life (the pool's answer is not: it
  // is asked on each whyNotSync).
  private readonly primaryNotSync: string | undefined

  constructor(
    readonly plan: PolicyPlan,
    private readonly context: DeciderContext,
    private readonly primary: GuardedStore | WriteBackBackend | LeaseBackend = context.remote,
  ) {
    this.primaryNotSync = whyPrimaryNotSync(plan, primary, context.remote)
  }

  decide(key: string, cost: number, startedAt: number): MaybeDecision {
    const primary = this.primary
    const first = primary.call(key, this.plan.remote.policies, cost)
    if (first instanceof Promise) return this.decideLater(primary, first, key, cost, startedAt)
    return this.decideFrom(primary, first, key, cost, startedAt)
  }

  /** The primary is the guarded store itself, with no sync engine in between (see DirectPath). */
  get decidesOnStore(): boolean {
    return this.primary === this.context.remote
  }

  /** The rest of `decide` once the primary answered `first` (undefined: it failed). */
  decideAnswered(first: EvaluateResponse | undefined, key: string, cost: number, startedAt: number): MaybeDecision {
    return this.decideFrom(this.primary, first, key, cost, startedAt)
  }

  whyNotSync(): string | undefined {
    if (this.primaryNotSync !== undefined) return this.primaryNotSync
    if (this.plan.hasElastic && this.context.pool?.limiter.canLimitSync !== true) {
      return 'elastic policies ask the shared pool, and the pool limiter cannot answer synchronously: use await limiter.limit(key)'
    }
    return undefined
  }

  async refund(key: string, cost: number): Promise<void> {
    const { local, onStoreError } = this.context
    const response = await this.primary.call(key, this.plan.remote.policies, -cost)
    // The units may have been charged locally while the store was away: give them back there.
    if (response === undefined && onStoreError === 'local') local.call(key, this.plan.local.policies, -cost)
    else if (response === undefined && onStoreError === 'open') local.ceiling(this.plan, key, -cost)
  }

  async reset(key: string): Promise<void> {
    await this.context.local.reset(key, this.plan.local.policies, this.plan)
    // Write-back forgets its copy (and the units it had not flushed) before the store's state goes.
    if (this.primary instanceof WriteBackBackend) this.primary.forget(key, this.plan.remote.policies)
    // A held lease was counted against the state being reset: it is dropped, not returned to the fresh one.
    if (this.primary instanceof LeaseBackend) this.primary.forget(key, this.plan.remote.policies)
    await this.context.remote.reset(key, this.plan.remote.policies)
  }

  private decideOn(backend: Backend, key: string, cost: number, startedAt: number): MaybeDecision {
    const first = backend.call(key, backend.tier(this.plan).policies, cost)
    if (first instanceof Promise) return this.decideLater(backend, first, key, cost, startedAt)
    return this.decideFrom(backend, first, key, cost, startedAt)
  }

  // The continuations of an asynchronous answer live in functions of their own: a function that
  // makes a closure allocates its context on every call, also on the synchronous path.
  private decideLater(
    backend: Backend,
    first: Promise<EvaluateResponse | undefined>,
    key: string,
    cost: number,
    startedAt: number,
  ): Promise<Decision> {
    return first.then((response) => this.decideFrom(backend, response, key, cost, startedAt))
  }

  // The rest once the backend answered the whole set (`first`; undefined: it failed).
  private decideFrom(backend: Backend, first: EvaluateResponse | undefined, key: string, cost: number, startedAt: number): MaybeDecision {
    if (first === undefined) return this.fallback(key, cost, startedAt)
    const plan = this.plan
    if (first.allowed || !plan.hasShadow || cost === 0 || !onlyShadowDenied(plan, first.results)) {
      return this.admit(
        backend,
        toDecision(plan, backend.tier(plan), first.results, first.allowed, sourceOf(first, backend)),
        key,
        cost,
        startedAt,
      )
    }
    return this.decideEnforcedAlone(backend, first, key, cost, startedAt)
  }

  // Apart from decideFrom, which every decision runs, so that the common path stays small.
  private decideEnforcedAlone(backend: Backend, first: EvaluateResponse, key: string, cost: number, startedAt: number): MaybeDecision {
    const plan = this.plan
    // Only shadow policies denied: the enforced ones are decided again alone. The first answer may
    // be the store's scratch object, which the second call overwrites: its results are copied.
    const firstResults = first.results.map(copyResult)
    const enforced = backend.tier(plan).enforced
    // Shadow policies alone: nothing is enforced, so there is nothing to charge and no store to ask
    // (a store refuses a request without policies: memcached's answered every would-deny with an error).
    if (enforced.length === 0)
      return this.decideEnforced(backend, firstResults, { allowed: true, results: [], now: first.now }, key, cost, startedAt)
    const second = backend.call(key, enforced, cost)
    if (second instanceof Promise) return this.decideEnforcedLater(backend, firstResults, second, key, cost, startedAt)
    return this.decideEnforced(backend, firstResults, second, key, cost, startedAt)
  }

  private decideEnforcedLater(
    backend: Backend,
    first: readonly PolicyResult[],
    second: Promise<EvaluateResponse | undefined>,
    key: string,
    cost: number,
    startedAt: number,
  ): Promise<Decision> {
    return second.then((response) => this.decideEnforced(backend, first, response, key, cost, startedAt))
  }

  private decideEnforced(
    backend: Backend,
    first: readonly PolicyResult[],
    second: EvaluateResponse | undefined,
    key: string,
    cost: number,
    startedAt: number,
  ): MaybeDecision {
    if (second === undefined) return this.fallback(key, cost, startedAt)
    const plan = this.plan
    const decision = toDecision(
      plan,
      backend.tier(plan),
      mergeShadow(plan, first, second.results),
      second.allowed,
      sourceOf(second, backend),
    )
    return this.admit(backend, decision, key, cost, startedAt)
  }

  private admit(backend: Backend, decision: Decision, key: string, cost: number, startedAt: number): MaybeDecision {
    // Only the local fallback store decides in the failure mode here; write-back's local copies are its normal path.
    if (backend.source === 'fallback-local') this.context.events.emit('fallback', decision.source)
    if (cost > 0 && this.plan.hasElastic && elasticOver(this.plan, decision)) {
      return this.confirmWithPool(backend, decision, key, cost, startedAt)
    }
    return this.finish(backend, decision, key, cost, startedAt, true)
  }

  /** The decision when the store failed or the breaker is open: the configured failure mode. */
  private fallback(key: string, cost: number, startedAt: number): MaybeDecision {
    const mode = this.context.onStoreError
    if (mode === 'local') return this.decideOn(this.context.local, key, cost, startedAt)
    const decision = failedDecision(mode, this.plan, this.context.remote, this.context.local, key, cost)
    this.context.events.emit('fallback', decision.source)
    return decision
  }

  /**
   * An elastic admission past the nominal limit stands only if the shared pool admits it too;
   * otherwise the key's charge is refunded and the request denied for the pool's wait. A failing
   * pool counts as no spare capacity: elastic headroom is granted only when confirmed. Charge, pool
   * and refund are separate steps: between them, concurrent requests for the key see the charge
   * (they may be denied a little early, never admitted past the ceiling).
   */
  private confirmWithPool(backend: Backend, admitted: Decision, key: string, cost: number, startedAt: number): MaybeDecision {
    let asked: MaybeDecision
    try {
      asked = askPool(this.context.pool!, cost)
    } catch (error) {
      return this.afterPool(backend, admitted, this.poolFailed(error), key, cost, startedAt)
    }
    if (asked instanceof Promise) return this.afterPoolLater(backend, admitted, asked, key, cost, startedAt)
    return this.afterPool(backend, admitted, asked, key, cost, startedAt)
  }

  private afterPoolLater(
    backend: Backend,
    admitted: Decision,
    asked: Promise<Decision>,
    key: string,
    cost: number,
    startedAt: number,
  ): Promise<Decision> {
    return asked.then(
      (pool) => this.afterPool(backend, admitted, pool, key, cost, startedAt),
      (error: unknown) => this.afterPool(backend, admitted, this.poolFailed(error), key, cost, startedAt),
    )
  }

  private afterPool(
    backend: Backend,
    admitted: Decision,
    pool: Decision | undefined,
    key: string,
    cost: number,
    startedAt: number,
  ): MaybeDecision {
    if (pool?.allowed) return this.finish(backend, admitted, key, cost, startedAt, true)
    const waitMs = Math.max(1, pool?.retryAfterMs ?? 1)
    const refund = backend.call(key, backend.tier(this.plan).policies, -cost)
    if (refund instanceof Promise) return this.poolDeniedLater(backend, admitted, refund, waitMs, key, cost, startedAt)
    return this.poolDenied(backend, admitted, refund, waitMs, key, cost, startedAt)
  }

  private poolDeniedLater(
    backend: Backend,
    admitted: Decision,
    refund: Promise<EvaluateResponse | undefined>,
    waitMs: number,
    key: string,
    cost: number,
    startedAt: number,
  ): Promise<Decision> {
    return refund.then((response) => this.poolDenied(backend, admitted, response, waitMs, key, cost, startedAt))
  }

  private poolDenied(
    backend: Backend,
    admitted: Decision,
    refund: EvaluateResponse | undefined,
    waitMs: number,
    key: string,
    cost: number,
    startedAt: number,
  ): Decision {
    const plan = this.plan
    const afterRefund = refund === undefined ? undefined : toDecision(plan, backend.tier(plan), refund.results, false, admitted.source)
    // The pool's state changes with every other key: its denial is not remembered in the deny cache.
    return this.finish(backend, toPoolDenial(plan, admitted, afterRefund, waitMs), key, cost, startedAt, false)
  }

  private poolFailed(error: unknown): undefined {
    this.context.events.emit('store-error', asError(error))
    return undefined
  }

  /** Attaches a lease to admitted requests with concurrency policies, and remembers store denials. */
  private finish(backend: Backend, decision: Decision, key: string, cost: number, startedAt: number, cacheable: boolean): Decision {
    if (cost === 0) return decision
    if (decision.allowed) {
      if (this.plan.hasConcurrency) this.context.leases.attach(key, cost, this.plan, backend, decision, startedAt)
    } else if (cacheable) {
      this.context.denials?.remember(key, this.plan, cost, decision)
    }
    return decision
  }
}

function whyPrimaryNotSync(plan: PolicyPlan, primary: Backend, remote: GuardedStore): string | undefined {
  if (primary instanceof LeaseBackend) {
    return `sync: '${plan.policies[0].sync}' asks the store when a lease runs short: use await limiter.limit(key)`
  }
  if (primary instanceof WriteBackBackend) {
    return "sync: 'write-back' reads a key from the store before its first decision: use await limiter.limit(key)"
  }
  if (!remote.synchronous) {
    return 'the store cannot answer synchronously (it has no evaluateSync, as a RedisStore does not): use await limiter.limit(key)'
  }
  return undefined
}

// The path that decided: a lease engine's answer says it (in-process or a store call); else the backend's.
function sourceOf(response: EvaluateResponse, backend: Backend): DecisionSource {
  return (response as Partial<SourcedResponse>).source ?? backend.source
}

function copyResult(result: PolicyResult): PolicyResult {
  return { ...result }
}
