// Upstream-style counting (a `rate_limit` rule or an Envoy override): the counter's ceiling, its
// count, and its decision reported as the rule's.

import type { Decision, PolicyDecision } from 'floodgate'
import type { EnvoyUnit, MatchedRule } from 'floodgate/rules'
import type { Entry } from './decide.js'

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
