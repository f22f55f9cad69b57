// One descriptor's work inside a Decider call, between matching its rule and reading its decision.

import type { Policy } from 'floodgate'
import type { MatchedRule } from 'floodgate/rules'
import type { DescriptorOutcome } from './decide-types.js'
import type { EnvoyLimit } from './envoy-counter.js'

/** A descriptor's work: decided already, an upstream-style counter, or Floodgate policies. */
export type Plan = { kind: 'done'; outcome: DescriptorOutcome } | EnvoyPlan | PoliciesPlan

export interface EnvoyPlan {
  kind: 'envoy'
  domain: string
  ruleId: string
  metricKey: string
  rule: MatchedRule | undefined
  storeKey: string
  /** The hits addend, as stats count it. */
  hits: number
  /** What is added to the counter (0 when STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT holds it back). */
  cost: number
  limit: EnvoyLimit
  /** The never-denying counter policy the limiter decides (see Decider.#counters). */
  counter: readonly [Policy]
  shadow: boolean
  quota: boolean
  outcome: DescriptorOutcome | undefined
}

export interface PoliciesPlan {
  kind: 'policies'
  domain: string
  ruleId: string
  metricKey: string
  rule: MatchedRule
  storeKey: string
  hits: number
  policies: readonly Policy[]
  shadow: boolean
  quota: boolean
  outcome: DescriptorOutcome | undefined
}

/**
 * Tells a rule that `replaces` removed from a descriptor that no rule matches: only a request of
 * several descriptors can replace, and a descriptor matched alone then finds its rule again.
 */
export function markReplaced(
  plans: Plan[],
  rules: readonly (MatchedRule | undefined)[],
  alone: (i: number) => MatchedRule | undefined,
): void {
  for (let i = 0; i < plans.length; i++) {
    const plan = plans[i]
    if (rules[i] !== undefined || plan.kind !== 'done' || plan.outcome.kind !== 'unmatched') continue
    const rule = alone(i)
    if (rule !== undefined) plans[i] = { kind: 'done', outcome: { kind: 'unmatched', replaced: rule.id } }
  }
}
