// Per-policy region modes: what each algorithm supports, and the policy a region decides with.
//
// A region decides every request against its own store, as if alone, with a policy whose limit
// accounts for the other regions:
// - shared, windows: the limit minus what the others admitted in the window (as heard);
// - split, windows: the region's base share plus what peers handed it (as heard);
// - shared, token-bucket and GCRA: the policy unchanged; the others' consumed units are charged
//   into the region's own state as they are heard (see forcedChargePolicy).

import type { AlgorithmName, Policy } from '../core/policy.js'
import type { RegionMode } from '../core/regions.js'
import { usedByOthers, type UsageFields } from './crdt.js'
import { enforcedLimit } from './allotments.js'

/** True when the algorithm counts units per window (shared subtracts and split allots per window). */
export function isWindowed(algorithm: AlgorithmName): boolean {
  return algorithm === 'fixed-window' || algorithm === 'sliding-window'
}

/** The window `now` falls in, as an index (epoch-aligned, as the algorithms align theirs). */
export function windowOf(now: number, periodMs: number): number {
  return Math.floor(now / periodMs)
}

/** What a region knows of a key's usage when it decides: the current window's fields and the one before. */
export interface RegionView {
  current: UsageFields
  previous: UsageFields
}

/**
 * The policy this region decides `policy` with at `now`. `regions` lists every region alike
 * (sorted); `self` is this one. Token-bucket and GCRA policies come back unchanged (their others'
 * usage is charged into the state instead). The limit never goes below 0 (deny everything).
 */
export function regionalPolicy(
  policy: Policy,
  mode: RegionMode,
  view: RegionView,
  regions: readonly string[],
  self: string,
  now: number,
): Policy {
  if (!isWindowed(policy.algorithm)) return policy
  let limit: number
  if (mode === 'split') {
    limit = enforcedLimit(policy.limit, regions, self, view.current)
  } else {
    const others = usedByOthers(view.current, self)
    let heard = others
    if (policy.algorithm === 'sliding-window') {
      // The others' previous window weighs as the algorithm weighs the region's own: linearly to 0.
      const elapsed = now - windowOf(now, policy.periodMs) * policy.periodMs
      heard += (usedByOthers(view.previous, self) * (policy.periodMs - elapsed)) / policy.periodMs
    }
    limit = Math.max(0, policy.limit - Math.ceil(heard))
  }
  return withLimit(policy, limit)
}

// Regional policies by base policy and limit: a limit changes at most once a tick, so decisions
// between ticks share one object (the store keeps per-policy work, such as key suffixes, by object).
const regional = new WeakMap<Policy, Map<number, Policy>>()
const MAX_LIMITS_PER_POLICY = 64

function withLimit(policy: Policy, limit: number): Policy {
  if (limit === policy.limit) return policy
  let byLimit = regional.get(policy)
  if (byLimit === undefined) regional.set(policy, (byLimit = new Map()))
  let made = byLimit.get(limit)
  if (made === undefined) {
    if (byLimit.size >= MAX_LIMITS_PER_POLICY) byLimit.delete(byLimit.keys().next().value!)
    made = Object.freeze({ ...policy, limit })
    byLimit.set(limit, made)
  }
  return made
}

/**
 * The policy that charges units heard from other regions into this region's own GCRA state: the
 * same emission interval, with a tolerance so large the charge always goes in (the key then owes
 * them, as it would had they been admitted here). Not for token-bucket: its state cannot go below
 * an empty bucket, so a heard charge takes at most what is left (see docs/regions.md).
 */
export function forcedChargePolicy(policy: Policy): Policy {
  return { ...policy, burst: Math.floor(Number.MAX_SAFE_INTEGER / 2 / policy.periodMs), blockMs: 0, shadow: false }
}
