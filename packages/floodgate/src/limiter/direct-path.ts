// The limiter's own one-policy set on the in-process MemoryStore, decided in one step: the store's
// answer read straight into the Decision, without the decider's general steps (shadow, pool, leases).

import type { Policy } from '../core/policy.js'
import { MemoryStore } from '../stores/memory/memory-store.js'
import type { CircuitBreaker } from './circuit-breaker.js'
import type { Decider, MaybeDecision } from './decider.js'
import type { Denials } from './deny-cache.js'
import type { GuardedStore } from './guarded-store.js'
import { policyPart } from './decisions.js'
import type { PolicyPlan } from './policy-plan.js'
import type { EvaluateResponse } from '../stores/store.js'
import type { Decision, PolicyDecision } from './types.js'

/**
 * What `ExactDecider.decide` answers for a plan of one hard or soft policy (not shadow, elastic or
 * concurrency) on the store itself (sync 'always'), when the store is a MemoryStore and no hook
 * watches its calls: the same Decision, built once. Anything else the breaker or a failing store
 * brings (an open breaker, a failure streak to end, a thrown error) goes to the decider, which owns it.
 */
export class DirectPath {
  private readonly policies: readonly Policy[]
  private readonly policy: Policy
  private readonly limit: number
  private readonly headroom: number
  private readonly breaker: CircuitBreaker
  /** A cost of 1 is one the plan can admit (RateLimiter.decideWith's maxCost check passes). */
  readonly admitsOne: boolean

  private constructor(
    private readonly store: MemoryStore,
    private readonly remote: GuardedStore,
    private readonly decider: DirectDecider,
    private readonly denials: Denials | undefined,
  ) {
    const plan = decider.plan
    this.policies = plan.remote.policies
    this.policy = plan.policies[0]
    this.limit = plan.remote.limits[0]
    this.headroom = plan.remote.headroom[0]
    this.breaker = remote.breakers.whole
    this.admitsOne = plan.maxCost >= 1
  }

  /** The direct path for `decider`, or undefined when its plan or store needs the general steps. */
  static of(decider: Decider | undefined, remote: GuardedStore, denials: Denials | undefined): DirectPath | undefined {
    if (decider === undefined || !isDirectDecider(decider) || !decider.decidesOnStore) return undefined
    if (!(remote.store instanceof MemoryStore) || !remote.plain || overridesEvaluateSync(remote.store)) return undefined
    if (!isOnePlainPolicy(decider.plan)) return undefined
    // limitSync takes the direct path without asking (RateLimiter.limitSync): it must answer in-process.
    if (decider.whyNotSync() !== undefined) return undefined
    return new DirectPath(remote.store, remote, decider, denials)
  }

  /** `decider.decide(key, cost, 0)`, for a cost the plan can admit (RateLimiter.decideWith checks). */
  decide(key: string, cost: number): MaybeDecision {
    const breaker = this.breaker
    // Closed and no streak to end (the usual case); else the guarded store's full path decides.
    if (breaker.isOpen || breaker.streak > 0) return this.decider.decide(key, cost, 0)
    let allowed: boolean
    let part: PolicyDecision
    try {
      // The one result of the set, which speaks for it (MemoryStore.decideOne).
      const result = this.store.decideOne(key, this.policies, cost)
      allowed = result.allowed
      part = policyPart(this.policy, this.limit, result, this.headroom, allowed, false)
    } catch (error) {
      return this.decider.decideAnswered(this.remote.failedWhole(error), key, cost, 0)
    }
    // decisionOf's fields and order.
    const decision: Decision = {
      allowed,
      limit: part.limit,
      remaining: part.remaining,
      resetMs: part.resetMs,
      retryAfterMs: allowed ? 0 : part.retryAfterMs,
      delayMs: allowed ? Math.max(0, part.delayMs) : 0,
      policy: part.name,
      over: part.over,
      shadow: false,
      source: 'store',
      policies: [part],
    }
    if (!allowed && cost > 0) this.denials?.remember(key, this.decider.plan, cost, decision)
    return decision
  }
}

/** The decider steps the direct path hands its exceptions to (ExactDecider). */
export interface DirectDecider extends Decider {
  /** The decider's primary is the guarded store itself (no sync engine in between). */
  readonly decidesOnStore: boolean
  /** The rest of `decide` once the store answered (`undefined`: it failed). */
  decideAnswered(first: EvaluateResponse | undefined, key: string, cost: number, startedAt: number): MaybeDecision
}

function isDirectDecider(decider: Decider): decider is DirectDecider {
  return typeof (decider as Partial<DirectDecider>).decideAnswered === 'function'
}

// A subclass that changes evaluateSync (the Store contract) but not decideOne keeps its change:
// decideOne would go past it.
function overridesEvaluateSync(store: MemoryStore): boolean {
  const own = MemoryStore.prototype
  return store.evaluateSync !== own.evaluateSync && store.decideOne === own.decideOne
}

function isOnePlainPolicy(plan: PolicyPlan): boolean {
  return plan.policies.length === 1 && !plan.hasShadow && !plan.hasElastic && !plan.hasConcurrency
}
