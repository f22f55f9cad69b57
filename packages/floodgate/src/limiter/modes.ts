// The policy modes at decision time. Soft needs nothing here: its allowance is in the plan (the store
// runs the scaled policy, decisions hide the headroom). Shadow and elastic need a second look.

import type { PolicyResult } from '../core/evaluate.js'
import type { PolicyPlan } from './policy-plan.js'
import type { Decision, RateLimiterOptions } from './types.js'

/** The shared pool of elastic policies (see RateLimiterOptions.pool). */
export type Pool = NonNullable<RateLimiterOptions['pool']>

/**
 * Asks the pool for `cost` units of spare capacity. A pool that can answer synchronously
 * (`canLimitSync`) is asked with `limitSync`, so an elastic decision on an in-process store needs
 * no promise (and `limitSync` works with elastic policies).
 */
export function askPool(pool: Pool, cost: number): Decision | Promise<Decision> {
  const limiter = pool.limiter
  const key = pool.key ?? 'elastic-pool'
  if (limiter.canLimitSync === true && limiter.limitSync !== undefined) return limiter.limitSync(key, { cost })
  return limiter.limit(key, { cost })
}

/**
 * True when an enforced elastic policy admitted past its nominal limit. Soft overage needs no pool,
 * and a shadow policy never denies, so its headroom is not confirmed with the pool either.
 */
export function elasticOver(plan: PolicyPlan, decision: Decision): boolean {
  for (let i = 0; i < plan.policies.length; i++) {
    const policy = plan.policies[i]
    if (decision.policies[i].over && policy.mode === 'elastic' && !policy.shadow) return true
  }
  return false
}

/** True when the set denied and every denying policy is a shadow one. */
export function onlyShadowDenied(plan: PolicyPlan, results: readonly PolicyResult[]): boolean {
  for (let i = 0; i < results.length; i++) {
    if (!results[i].allowed && !plan.policies[i].shadow) return false
  }
  return true
}

/** Shadow policies' results from the first call, enforced policies' from the second. */
export function mergeShadow(plan: PolicyPlan, first: readonly PolicyResult[], enforced: readonly PolicyResult[]): PolicyResult[] {
  const merged = first.slice()
  const index = plan.enforcedIndex
  for (let j = 0; j < index.length; j++) merged[index[j]] = enforced[j]
  return merged
}
