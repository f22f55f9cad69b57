// Turns the store's per-policy results into the Decision callers read, in nominal terms.

import { decidingPolicy, type PolicyResult } from '../core/evaluate.js'
import type { PolicyPlan, Tier } from './policy-plan.js'
import type { Decision, DecisionSource, PolicyDecision } from './types.js'

/**
 * Builds a Decision. `remaining` hides the soft/elastic headroom (never below 0), `over` marks a
 * policy that admitted past its nominal capacity, `shadow` a shadow policy that would have denied.
 * The deciding policy is chosen among the enforced (non-shadow) policies, as they alone decide.
 */
export function toDecision(
  plan: PolicyPlan,
  tier: Tier,
  results: readonly PolicyResult[],
  allowed: boolean,
  source: DecisionSource,
): Decision {
  const count = plan.policies.length
  if (count === 1) return toSingleDecision(toPart(plan, tier, results, allowed, 0), allowed, source)
  // Grown by push from []: never new Array(n), which stays holey, slower to read.
  const parts: PolicyDecision[] = []
  for (let i = 0; i < count; i++) parts.push(toPart(plan, tier, results, allowed, i))
  let over = false
  let shadow = false
  let delayMs = 0
  for (let i = 0; i < count; i++) {
    const part = parts[i]
    if (part.over) over = true
    if (part.shadow) shadow = true
    if (part.delayMs > delayMs) delayMs = part.delayMs
  }
  const deciding = parts[plan.hasShadow ? decidingEnforced(plan, results) : decidingPolicy(results)]
  return decisionOf(deciding, allowed, delayMs, over, shadow, source, parts)
}

/**
 * toDecision for a set of one policy (the usual one): its part speaks for the decision, with no
 * loop over parts or search for the deciding one. The parts array is a literal of one: grown by
 * push from [], its first push would allocate room for many.
 */
function toSingleDecision(part: PolicyDecision, allowed: boolean, source: DecisionSource): Decision {
  return decisionOf(part, allowed, Math.max(0, part.delayMs), part.over, part.shadow, source, [part])
}

// The decision `deciding` speaks for, with what the whole set says (the longest delay, over, shadow).
function decisionOf(
  deciding: PolicyDecision,
  allowed: boolean,
  delayMs: number,
  over: boolean,
  shadow: boolean,
  source: DecisionSource,
  parts: PolicyDecision[],
): Decision {
  return {
    allowed,
    limit: deciding.limit,
    remaining: deciding.remaining,
    resetMs: deciding.resetMs,
    retryAfterMs: allowed ? 0 : deciding.retryAfterMs,
    delayMs: allowed ? delayMs : 0,
    policy: deciding.name,
    over,
    shadow,
    source,
    policies: parts,
  }
}

function toPart(plan: PolicyPlan, tier: Tier, results: readonly PolicyResult[], allowed: boolean, i: number): PolicyDecision {
  const policy = plan.policies[i]
  const result = results[i]
  return policyPart(policy, tier.limits[i], result, tier.headroom[i], allowed, policy.shadow && !result.allowed)
}

/**
 * One policy's part of a decision. Both the general path and the direct path (direct-path.ts) build
 * parts here, so their decisions share one object shape and one rule for headroom and `over`.
 */
export function policyPart(
  policy: PolicyPlan['policies'][number],
  limit: number,
  result: PolicyResult,
  headroom: number,
  allowed: boolean,
  shadow: boolean,
): PolicyDecision {
  return {
    name: policy.name,
    algorithm: policy.algorithm,
    limit,
    periodMs: policy.periodMs,
    allowed: result.allowed,
    remaining: result.remaining > headroom ? result.remaining - headroom : 0,
    resetMs: result.resetMs,
    retryAfterMs: result.retryAfterMs,
    delayMs: result.delayMs,
    blocked: result.blocked,
    over: allowed && result.allowed && result.remaining < headroom,
    shadow,
  }
}

function decidingEnforced(plan: PolicyPlan, results: readonly PolicyResult[]): number {
  const index = plan.enforcedIndex
  // A set of shadow policies only decides nothing; the tightest of them still speaks for it.
  if (index.length === 0) return decidingPolicy(results)
  return index[decidingPolicy(index.map((i) => results[i]))]
}

/** A decision made without the store: `open` allows, `closed` denies for `waitMs`. */
export function toFallbackDecision(plan: PolicyPlan, allowed: boolean, waitMs: number, source: DecisionSource): Decision {
  const policies = plan.policies
  const parts: PolicyDecision[] = new Array(policies.length)
  for (let i = 0; i < policies.length; i++) {
    const policy = policies[i]
    parts[i] = {
      name: policy.name,
      algorithm: policy.algorithm,
      limit: policy.limit,
      periodMs: policy.periodMs,
      allowed,
      // Nothing is known of the key's use; an allowed request reports the full limit, a denied one none.
      remaining: allowed ? policy.limit : 0,
      resetMs: allowed ? 0 : waitMs,
      retryAfterMs: allowed ? 0 : waitMs,
      delayMs: 0,
      blocked: false,
      over: false,
      shadow: false,
    }
  }
  const deciding = parts[plan.enforcedIndex.length > 0 ? plan.enforcedIndex[0] : 0]
  return {
    allowed,
    limit: deciding.limit,
    remaining: deciding.remaining,
    resetMs: deciding.resetMs,
    retryAfterMs: deciding.retryAfterMs,
    delayMs: 0,
    policy: deciding.name,
    over: false,
    shadow: false,
    source,
    policies: parts,
  }
}

/** A remembered denial replayed from the deny cache: the same parts, waits shortened by the time passed. */
export function fromDenyCache(cached: Decision, until: number, now: number): Decision {
  const wait = until - now
  const elapsed = cached.retryAfterMs - wait
  const parts = cached.policies.map((part) => ({
    ...part,
    resetMs: Math.max(0, part.resetMs - elapsed),
    retryAfterMs: Math.max(0, part.retryAfterMs - elapsed),
  }))
  return {
    ...cached,
    resetMs: Math.max(0, cached.resetMs - elapsed),
    retryAfterMs: wait,
    source: 'deny-cache',
    policies: parts,
  }
}

/**
 * The denial when an elastic admission past the limit was refused by the shared pool: the elastic
 * policies that were over deny for the pool's wait; the others report the state after the refund.
 */
export function toPoolDenial(plan: PolicyPlan, admitted: Decision, afterRefund: Decision | undefined, waitMs: number): Decision {
  const base = afterRefund ?? admitted
  let deciding: PolicyDecision | undefined
  const parts = base.policies.map((part, i) => {
    const policy = plan.policies[i]
    if (!admitted.policies[i].over || policy.mode !== 'elastic' || policy.shadow) return { ...part, over: false }
    const denied = {
      ...part,
      allowed: false,
      remaining: 0,
      resetMs: Math.max(part.resetMs, waitMs),
      retryAfterMs: waitMs,
      delayMs: 0,
      over: false,
    }
    deciding ??= denied
    return denied
  })
  const speaker = deciding ?? parts[0]
  return {
    allowed: false,
    limit: speaker.limit,
    remaining: 0,
    resetMs: speaker.resetMs,
    retryAfterMs: waitMs,
    delayMs: 0,
    policy: speaker.name,
    over: false,
    shadow: base.shadow,
    source: admitted.source,
    policies: parts,
  }
}

/**
 * The answer to a cost above what an enforced policy could ever admit (see `Decision.never`), from
 * a peek at the key (`peeked`, cost 0: nothing charged, no block started). Each such policy denies
 * with no wait; the first of them speaks for the decision.
 */
export function toNeverDecision(plan: PolicyPlan, peeked: Decision, cost: number): Decision {
  const parts = peeked.policies.slice()
  let speaker: PolicyDecision | undefined
  for (let i = 0; i < parts.length; i++) {
    if (plan.policies[i].shadow || cost <= plan.capacity[i]) continue
    parts[i] = { ...parts[i], allowed: false, retryAfterMs: 0, delayMs: 0, never: true }
    speaker ??= parts[i]
  }
  const deciding = speaker ?? parts[0]
  return {
    ...peeked,
    allowed: false,
    limit: deciding.limit,
    remaining: deciding.remaining,
    resetMs: deciding.resetMs,
    retryAfterMs: 0,
    delayMs: 0,
    policy: deciding.name,
    over: false,
    never: true,
    policies: parts,
  }
}
