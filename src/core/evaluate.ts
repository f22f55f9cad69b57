// Decides several policies for one key all-or-nothing, with block periods. Mirrored line by line
// by src/stores/redis/scripts/runner.lua; both stores call this logic, nothing else does.

import type { Policy } from './policy.js'
import type { State, StepResult } from './algorithms/types.js'
import { ALGORITHM_BY_NAME } from './algorithms/index.js'

/** What a store keeps per (key, policy): the algorithm's state and a block deadline (0 = none). */
export interface PolicyRecord {
  blockedUntil: number
  state: State | undefined
}

/** One policy's outcome within a decision. */
export interface PolicyResult extends Omit<StepResult, 'state'> {
  /** True when the denial comes from a block period, not from the algorithm. */
  blocked: boolean
}

export interface KeyEvaluation {
  /** All policies allowed (and so all were charged); false means none was charged. */
  allowed: boolean
  results: PolicyResult[]
  /** Records to store, one per policy, with how long each must be kept (ms, ≥ 1). */
  records: PolicyRecord[]
  ttlMs: number[]
}

/**
 * Runs every policy on its record. If any denies, no state changes (all-or-nothing); each
 * denying policy with `blockMs` starts a block period (only for `cost > 0`). Results of policies
 * that would have allowed are re-read with a peek so that `remaining` reflects what was stored.
 */
export function evaluateKey(
  records: readonly (PolicyRecord | undefined)[],
  now: number,
  cost: number,
  policies: readonly Policy[],
): KeyEvaluation {
  const steps: (StepResult | undefined)[] = []
  const results: PolicyResult[] = []
  let allowed = true
  for (let i = 0; i < policies.length; i++) {
    const policy = policies[i]
    const record = records[i]
    const blockedUntil = record !== undefined && record.blockedUntil > now ? record.blockedUntil : 0
    if (cost > 0 && blockedUntil > 0) {
      const wait = blockedUntil - now
      steps.push(undefined)
      results.push({ allowed: false, remaining: 0, resetMs: wait, retryAfterMs: wait, delayMs: 0, blocked: true })
      allowed = false
      continue
    }
    const step = ALGORITHM_BY_NAME[policy.algorithm].step(record?.state, now, cost, policy)
    steps.push(step)
    results.push(toResult(step))
    if (!step.allowed) allowed = false
  }

  const nextRecords: PolicyRecord[] = []
  const ttlMs: number[] = []
  for (let i = 0; i < policies.length; i++) {
    const policy = policies[i]
    const algorithm = ALGORITHM_BY_NAME[policy.algorithm]
    const record = records[i]
    let blockedUntil = record !== undefined && record.blockedUntil > now ? record.blockedUntil : 0
    let state = record?.state
    const step = steps[i]
    if (allowed) {
      state = step!.state
    } else if (step !== undefined) {
      if (!step.allowed && cost > 0 && policy.blockMs > 0) {
        blockedUntil = now + policy.blockMs
        const result = results[i]
        result.retryAfterMs = Math.max(result.retryAfterMs, policy.blockMs)
        result.resetMs = Math.max(result.resetMs, policy.blockMs)
      } else if (step.allowed && cost > 0) {
        results[i] = toResult(algorithm.step(state, now, 0, policy))
      }
    }
    nextRecords.push({ blockedUntil, state })
    let ttl = state === undefined ? 1 : algorithm.ttlMs(state, now, policy)
    if (blockedUntil > 0) ttl = Math.max(ttl, blockedUntil - now)
    ttlMs.push(ttl)
  }
  return { allowed, results, records: nextRecords, ttlMs }
}

/**
 * The index of the policy that speaks for a decision: when denied, the denying policy with the
 * longest wait; when allowed, the one with the fewest remaining (the tightest), first on ties.
 */
export function decidingPolicy(results: readonly PolicyResult[]): number {
  let best = 0
  for (let i = 1; i < results.length; i++) {
    const a = results[i]
    const b = results[best]
    if (a.allowed !== b.allowed) {
      if (!a.allowed) best = i
    } else if (!a.allowed ? a.retryAfterMs > b.retryAfterMs : a.remaining < b.remaining) {
      best = i
    }
  }
  return best
}

function toResult(step: StepResult): PolicyResult {
  return {
    allowed: step.allowed,
    remaining: step.remaining,
    resetMs: step.resetMs,
    retryAfterMs: step.retryAfterMs,
    delayMs: step.delayMs,
    blocked: false,
  }
}
