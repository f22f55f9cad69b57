// Upstream-style counting (a `rate_limit` rule or an Envoy override): the counter's ceiling, its
// count, and its decision reported as the rule's.

import { createPolicy, type Decision, type Policy, type PolicyDecision } from 'floodgate'
import { envoyPolicyName, type EnvoyUnit, type MatchedRule, UNIT_MS } from 'floodgate/rules'
import type { Entry } from './decide-types.js'

/**
 * The limit of an upstream-style counter. The counter is a fixed window that denies nothing a
 * rule could admit: the store counts every hit, as upstream's INCRBY does, and the limit is
 * compared afterwards. Below 2^53 so every count stays an exact integer in JavaScript and in Lua.
 * Hits the counter cannot take (more than is left of it; any addend above it is never even sent
 * to the store, see RateLimiter.limit) are denied by it, uncharged, and the descriptor is over.
 */
export const COUNT_CEILING = 1e15

/** The limit an upstream-style descriptor counts against. */
export interface EnvoyLimit {
  unit: EnvoyUnit
  requestsPerUnit: number
  name: string
  /** The rule's own limit object, which keys its counter; undefined for a request's override. */
  of: MatchedRule['envoyLimit']
}

// The limits and statuses of upstream-style descriptors are built field by field, not spread: V8
// copied these spreads by its generic path, at more than the rest of a descriptor's decision costs.
export function envoyLimitOf(limit: { unit: EnvoyUnit; requestsPerUnit: number }, name: string, of: MatchedRule['envoyLimit']): EnvoyLimit {
  return { unit: limit.unit, requestsPerUnit: limit.requestsPerUnit, name, of }
}

/**
 * The count of an upstream-style counter after a call: what its ceiling has lost (the ceiling is
 * divided per instance when the local fallback decided).
 */
export function countOf(decision: Decision): number {
  return Math.max(0, decision.limit - decision.remaining)
}

/**
 * The counter's decision as the rule's: the rule's limit and verdict in place of the ceiling's,
 * every other field as the store gave it. Written out field by field, as spreading the decision
 * and its policy part cost more than the rest of the descriptor's decision (V8's generic copy).
 */
export function reportedDecision(
  decision: Decision,
  limit: number,
  allowed: boolean,
  remaining: number,
  retryAfterMs: number,
  shadow: boolean,
  never: boolean,
): Decision {
  const counter = decision.policies[0]
  const part: PolicyDecision = {
    name: counter.name,
    algorithm: counter.algorithm,
    limit,
    periodMs: counter.periodMs,
    allowed,
    remaining,
    resetMs: counter.resetMs,
    retryAfterMs,
    delayMs: counter.delayMs,
    blocked: counter.blocked,
    over: counter.over,
    shadow,
  }
  if (never) part.never = true
  else if (counter.never !== undefined) part.never = counter.never
  const reported: Decision = {
    allowed,
    limit,
    remaining,
    resetMs: decision.resetMs,
    retryAfterMs,
    delayMs: decision.delayMs,
    policy: decision.policy,
    over: decision.over,
    shadow,
    source: decision.source,
    policies: [part],
  }
  if (never) reported.never = true
  else if (decision.never !== undefined) reported.never = decision.never
  if (decision.lease !== undefined) reported.lease = decision.lease
  return reported
}

/** Upstream's stats key of an override: `domain.key_value.key2_value2` (a key alone when its value is empty). */
export function overrideMetricKey(domain: string, entries: readonly Entry[]): string {
  let key = domain
  for (const entry of entries) key += entry.value === '' ? `.${entry.key}` : `.${entry.key}_${entry.value}`
  return key
}

/** Counter policies kept for reuse (each distinct unit and rate, overrides included). */
const MAX_COUNTER_POLICIES = 1024

/**
 * The never-denying counter of each unit, shared by rules and overrides of that unit, as the
 * one-policy array the limiter is given: the same array each time, so the limiter's plan for it is
 * built once.
 */
export class CounterPolicies {
  private readonly byRate = new Map<string, readonly [Policy]>()
  /** The same arrays by the rule limit they count for, so a rule's descriptor finds its counter without a key. */
  private readonly byRule = new WeakMap<NonNullable<MatchedRule['envoyLimit']>, readonly [Policy]>()

  // One counter per descriptor and unit whatever the rate (the policy's name is the unit's), with
  // the rate as its nominal limit so the memory store keeps keys near their limit through a flood.
  // A rule's counter is kept with the rule's limit (no key to build per request); override rates
  // come from requests: that cache is bounded, oldest first out.
  of(limit: EnvoyLimit): readonly [Policy] {
    const known = limit.of === undefined ? undefined : this.byRule.get(limit.of)
    if (known !== undefined) return known
    const id = `${limit.unit}/${limit.requestsPerUnit}`
    let policies = this.byRate.get(id)
    if (policies === undefined) {
      const counter = createPolicy({
        name: envoyPolicyName(limit.unit),
        algorithm: 'fixed-window',
        limit: COUNT_CEILING,
        period: UNIT_MS[limit.unit],
      })
      policies = Object.freeze([Object.freeze({ ...counter, nominalLimit: limit.requestsPerUnit })] as [Policy])
      if (this.byRate.size >= MAX_COUNTER_POLICIES) this.byRate.delete(this.byRate.keys().next().value!)
      this.byRate.set(id, policies)
    }
    if (limit.of !== undefined) this.byRule.set(limit.of, policies)
    return policies
  }
}
