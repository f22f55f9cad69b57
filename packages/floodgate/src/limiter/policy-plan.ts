// Policy plans: a policy set compiled once into what the store runs (soft/elastic scaled, divided
// for the local fallback) and what decisions report (nominal limits, headroom to hide).

import { ALGORITHM_BY_NAME } from '../core/algorithms/index.js'
import type { Policy } from '../core/policy.js'

/** One way of running a plan: against the store (`remote`) or the local fallback (`local`). */
export interface Tier {
  /**
   * What the store decides with: soft policies scaled by 1 + overage, elastic ones to their ceiling. Names
   * unchanged, so the state is the same key.
   */
  readonly policies: readonly Policy[]
  /** The non-shadow policies, decided alone when only shadow policies denied. */
  readonly enforced: readonly Policy[]
  /** The limit each policy's decision reports (nominal; divided by `instances` for the local tier). */
  readonly limits: readonly number[]
  /** Capacity units each scaled policy has above its nominal one; decisions report `remaining` without them. */
  readonly headroom: readonly number[]
}

/** A policy set ready to run, built once per set (the limiter caches it by array identity). */
export interface PolicyPlan {
  /** The nominal policies, in the caller's order. */
  readonly policies: readonly Policy[]
  readonly remote: Tier
  readonly local: Tier
  /** Any shadow policy in the set. */
  readonly hasShadow: boolean
  /** Positions of the non-shadow policies in `policies`. */
  readonly enforcedIndex: readonly number[]
  /** Any elastic policy in the set (the shared pool must confirm admissions past the limit). */
  readonly hasElastic: boolean
  /** Any concurrency policy in the set (admitted requests carry a lease). */
  readonly hasConcurrency: boolean
  /** Prefix of this plan's deny-cache keys: '' for the limiter's own set. */
  readonly cacheTag: string
  /** What a fresh key may spend at once of each policy as the store runs it (remote tier): a larger cost never passes it. */
  readonly capacity: readonly number[]
  /** The largest cost every enforced policy could ever admit (Infinity when all are shadow); see RateLimiter.limit. */
  readonly maxCost: number
}

// Products like 10 × 1.1 land a hair above or below the integer; the epsilon keeps floor() honest.
const EPSILON = 1e-9

/**
 * Compiles a validated policy set; `instances` divides limits for the local fallback tier. `now`
 * (the limiter's clock) is when fresh keys' capacities are asked of the algorithms.
 */
export function createPlan(policies: readonly Policy[], instances: number, cacheTag: string, now: number): PolicyPlan {
  const remote = createTier(policies, policies, now)
  const divided = instances === 1 ? policies : policies.map((policy) => dividedPolicy(policy, instances))
  const local = instances === 1 ? remote : createTier(divided, policies, now)
  const enforcedIndex: number[] = []
  for (let i = 0; i < policies.length; i++) if (!policies[i].shadow) enforcedIndex.push(i)
  const capacities = remote.policies.map((policy) => capacity(policy, now))
  return Object.freeze({
    policies,
    remote,
    local,
    hasShadow: enforcedIndex.length < policies.length,
    enforcedIndex,
    hasElastic: policies.some((policy) => policy.mode === 'elastic'),
    hasConcurrency: policies.some((policy) => policy.algorithm === 'concurrency'),
    cacheTag,
    capacity: capacities,
    maxCost: Math.min(...enforcedIndex.map((i) => capacities[i])),
  })
}

function createTier(nominal: readonly Policy[], original: readonly Policy[], now: number): Tier {
  const policies = nominal.map(scaledPolicy)
  return Object.freeze({
    policies,
    enforced: policies.filter((_, i) => !original[i].shadow),
    limits: nominal.map((policy) => policy.limit),
    headroom: nominal.map((policy, i) => capacity(policies[i], now) - capacity(policy, now)),
  })
}

/**
 * A text that is equal for equal policy sets, so a caller building a fresh array per call (e.g. a
 * request-supplied override) still reuses one plan, its deny-cache entries and the store's fast path.
 */
export function planSignature(policies: readonly Policy[]): string {
  let signature = ''
  for (const p of policies) {
    signature +=
      `${p.name}\u0000${p.algorithm}\u0000${p.limit}\u0000${p.periodMs}\u0000${p.burst}\u0000${p.shaping}\u0000${p.mode}\u0000` +
      `${p.overage}\u0000${p.ceiling}\u0000${p.blockMs}\u0000${p.shadow}\u0000${p.nominalLimit}\u0000${p.regions}\n`
  }
  return signature
}

/**
 * The policy the store runs for a mode: soft scales limit and burst by 1 + overage, elastic
 * scales them by ceiling / limit (both floored); hard is itself.
 */
export function scaledPolicy(policy: Policy): Policy {
  if (policy.mode === 'soft') return withCapacity(policy, 1 + policy.overage)
  if (policy.mode === 'elastic') return withCapacity(policy, policy.ceiling / policy.limit)
  return policy
}

function withCapacity(policy: Policy, factor: number): Policy {
  return Object.freeze({
    ...policy,
    limit: Math.floor(policy.limit * factor + EPSILON),
    burst: Math.floor(policy.burst * factor + EPSILON),
  })
}

/** A policy's share for one of `instances` processes deciding alone (each amount ceiled, ≥ 1). */
export function dividedPolicy(policy: Policy, instances: number): Policy {
  const limit = Math.max(1, Math.ceil(policy.limit / instances))
  return Object.freeze({
    ...policy,
    limit,
    burst: Math.max(1, Math.ceil(policy.burst / instances)),
    ceiling: Math.max(limit, Math.ceil(policy.ceiling / instances)),
  })
}

// What a fresh key may spend at once, asked of the algorithm itself (burst for buckets, limit for
// windows), so headroom is right for every algorithm without a list of which uses which.
function capacity(policy: Policy, now: number): number {
  return ALGORITHM_BY_NAME[policy.algorithm].step(undefined, now, 0, policy).remaining
}
