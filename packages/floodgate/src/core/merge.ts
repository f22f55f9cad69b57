// Merging usage into a state: units admitted elsewhere (another instance, another region) charged
// regardless of the limit; twin of src/stores/redis/scripts/merge.lua.
//
// Write-back sync decides from a local copy and later charges what it admitted into the shared
// state. Those requests were already let through, so the charge is forced: it counts even past the
// limit, and the state then owes it (a count above the limit, a bucket below empty, a GCRA arrival
// time beyond its tolerance), which every algorithm's step already reads as "denied until repaid".
// Negative units give back (refunds made locally), never past a fresh state, as a step's refund.
//
// A merge is defined where a state is a sum of units: counters and rates. It is refused where it is
// not (mergeRefusal says why): a concurrency state is a set of leases, each released on its own; a
// sliding log is the time of every admission, so a delta would have to carry them all; shaping
// hands each request its own slot in a queue, which two instances deciding apart would hand twice.

import type { AlgorithmName, Policy } from './policy.js'
import type { State } from './algorithms/types.js'
import { ALGORITHM_BY_NAME } from './algorithms/index.js'
import { leakyBucketStoredLevel } from './algorithms/leaky-bucket.js'
import type { PolicyRecord } from './evaluate.js'

/** Charges `units` (> 0) or gives them back (< 0) into `state` at `now`, ignoring the limit; returns the new state. */
export type MergeUnits = (state: State | undefined, now: number, units: number, policy: Policy) => State

/**
 * A window counter's merge, or GCRA's, is its own step with the bound a forced charge may pass
 * lifted (`limit` for the windows, `burst` for GCRA): the step then always admits, and its window
 * roll, refund rule and arithmetic are written once. A bucket's burst also caps its refill, so
 * lifting it would change the state: the buckets keep merges of their own, below.
 */
function stepUnbounded(algorithm: AlgorithmName, lifted: 'limit' | 'burst'): MergeUnits {
  const step = ALGORITHM_BY_NAME[algorithm].step
  const unbounded = new WeakMap<Policy, Policy>()
  return (state, now, units, policy) => {
    let lifting = unbounded.get(policy)
    if (lifting === undefined) {
      lifting = { ...policy, [lifted]: Number.POSITIVE_INFINITY }
      unbounded.set(policy, lifting)
    }
    return step(state, now, units, lifting).state
  }
}

const mergeTokenBucket: MergeUnits = (state, now, units, policy) => {
  const { limit, periodMs, burst } = policy
  const capacity = burst * periodMs
  let at = now
  let level = capacity
  if (state !== undefined) {
    at = Math.max(now, state[1])
    level = Math.min(capacity, state[0] + (at - state[1]) * limit)
  }
  // Below zero is debt: the bucket refills it before it admits again.
  level = units > 0 ? level - units * periodMs : Math.min(capacity, level - units * periodMs)
  return [level, at]
}

const mergeLeakyBucket: MergeUnits = (state, now, units, policy) => {
  const { limit, periodMs } = policy
  let lastMs = now
  let level = 0
  if (state !== undefined) {
    lastMs = Math.max(now, state[1])
    level = Math.max(0, leakyBucketStoredLevel(state, periodMs) - (lastMs - state[1]) * limit)
  }
  // Above the brim is debt: it leaks out before anything fits again.
  return [Math.max(0, level + units * periodMs), lastMs, periodMs]
}

/** The merge of every algorithm that has one; the others are refused (mergeRefusal says why). */
export const MERGE_BY_NAME: Readonly<Partial<Record<AlgorithmName, MergeUnits>>> = Object.freeze({
  'fixed-window': stepUnbounded('fixed-window', 'limit'),
  'sliding-window': stepUnbounded('sliding-window', 'limit'),
  'token-bucket': mergeTokenBucket,
  'leaky-bucket': mergeLeakyBucket,
  gcra: stepUnbounded('gcra', 'burst'),
})

/**
 * Why states of this algorithm (and form) cannot be merged, a sentence for an error message, or
 * undefined when they can. write-back sync refuses what this refuses (core/sync.ts).
 */
export function mergeRefusal(algorithm: AlgorithmName, shaping: boolean): string | undefined {
  switch (algorithm) {
    case 'concurrency':
      return (
        'a concurrency state is a set of leases in flight, each released on its own, not a sum of units that a delta can ' +
        "carry (and a local copy cannot see other instances release them); use sync: 'lease' or 'always'"
      )
    case 'sliding-log':
      return (
        'a sliding log keeps the time of every admission, so a delta would have to carry every timestamp; use ' +
        "sliding-window (the same limit, a mergeable count), or sync: 'always'"
      )
    case 'leaky-bucket':
      return shaping
        ? 'shaping gives each request its own turn in one queue (delayMs), and instances deciding apart would give the ' +
            "same turn twice; use shaping: false, or sync: 'always'"
        : undefined
    default:
      return MERGE_BY_NAME[algorithm] === undefined ? `${algorithm} has no merge` : undefined
  }
}

/** A key's records after a merge, and how long each must be kept (ms, ≥ 1). */
export interface KeyMerge {
  records: PolicyRecord[]
  ttlMs: number[]
}

/**
 * Merges `units[i]` into each policy's record at `now` (mirrored by merge.lua's mergeKey). Zero units
 * leave a record as it is (a read). A block period is kept while it runs. Every policy must have a
 * merge (see mergeRefusal). The answer is new; input states are only read.
 */
export function mergeKey(
  records: readonly (PolicyRecord | undefined)[],
  now: number,
  units: readonly number[],
  policies: readonly Policy[],
): KeyMerge {
  const merged: PolicyRecord[] = new Array(policies.length)
  const ttlMs: number[] = new Array(policies.length)
  for (let i = 0; i < policies.length; i++) {
    const policy = policies[i]
    const record = records[i]
    const blockedUntil = record !== undefined && record.blockedUntil > now ? record.blockedUntil : 0
    let state = record?.state
    if (units[i] !== 0) state = MERGE_BY_NAME[policy.algorithm]!(state, now, units[i], policy)
    let ttl = state === undefined ? 1 : ALGORITHM_BY_NAME[policy.algorithm].ttlMs(state, now, policy)
    if (blockedUntil > 0) ttl = Math.max(ttl, blockedUntil - now)
    merged[i] = { blockedUntil, state }
    ttlMs[i] = ttl
  }
  return { records: merged, ttlMs }
}
