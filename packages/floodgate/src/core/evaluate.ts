// Decides several policies for one key all-or-nothing, with block periods; both stores call this
// logic, nothing else does. RedisStore's twin, src/stores/redis/scripts/evaluate.lua, is generated
// from createEvaluation and evaluateKeyInto and every function and constant they reach (see
// scripts/gen-algorithms.mjs), so those are written in its subset: no `continue`, no closures.

import type { Policy } from './policy.js'
import { createStepResult, type State, type StepResult } from './algorithms/types.js'
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
 * denying policy with `blockMs` starts a block period (only for `cost > 0`). A blocked policy
 * denies charges and peeks (refunds pass) with a wait covering both the block and the algorithm. Results of policies
 * that would have allowed are re-read with a peek so that `remaining` reflects what was stored.
 * The answer is new, states included; see `evaluateKeyInto` for the allocation-free form stores use.
 */
export function evaluateKey(
  records: readonly (PolicyRecord | undefined)[],
  now: number,
  cost: number,
  policies: readonly Policy[],
): KeyEvaluation {
  return decide(records, now, cost, policies, createEvaluation(), [])
}

/** An empty evaluation for `evaluateKeyInto` to fill; a store keeps one and reuses it for every call. */
export function createEvaluation(): KeyEvaluation {
  return { allowed: true, results: [], records: [], ttlMs: [] }
}

// Where evaluateKeyInto's steps write, one per policy position. It runs to the end without calling
// anything that could re-enter it (steps are pure), so one set serves every call.
const stepBuffers: StepResult[] = []
// Which policies were stepped (undefined: blocked) in the call in progress, for the same reason.
const steps: (StepResult | undefined)[] = []

/**
 * `evaluateKey` without allocating: `out`'s arrays, result objects and record objects are
 * overwritten in place (sized to `policies`), and the algorithms write into reused step buffers.
 * Results are valid until the next call with the same `out`; a new record state (a step buffer's
 * array) only until the next call of evaluateKeyInto at all: a store copies its numbers into its
 * own state arrays. Input states are only read.
 */
export function evaluateKeyInto(
  records: readonly (PolicyRecord | undefined)[],
  now: number,
  cost: number,
  policies: readonly Policy[],
  out: KeyEvaluation,
): KeyEvaluation {
  return decide(records, now, cost, policies, out, stepBuffers)
}

// The body of both forms: `buffers` are where the steps write (grown on demand; new ones for
// evaluateKey, so its states are the caller's to keep).
function decide(
  records: readonly (PolicyRecord | undefined)[],
  now: number,
  cost: number,
  policies: readonly Policy[],
  out: KeyEvaluation,
  buffers: StepResult[],
): KeyEvaluation {
  const results = out.results
  const nextRecords = out.records
  const ttlMs = out.ttlMs
  sizeEvaluation(out, policies.length)
  while (buffers.length < policies.length) buffers.push(createStepResult())
  let allowed = true
  for (let i = 0; i < policies.length; i++) {
    const policy = policies[i]
    const record = records[i]
    const blockedUntil = record !== undefined && record.blockedUntil > now ? record.blockedUntil : 0
    const state = record?.state
    // A caller feeding a previous answer's records back in: the step must not write what it reads.
    if (state === buffers[i].state) buffers[i].state = []
    const step = ALGORITHM_BY_NAME[policy.algorithm].step(state, now, cost, policy, buffers[i])
    if (cost >= 0 && blockedUntil > 0) {
      // Blocked (a peek too): the wait covers the block and the algorithm's own wait after it.
      const wait = blockedUntil - now
      steps[i] = undefined
      setResult(results[i], false, 0, Math.max(wait, step.resetMs), Math.max(wait, step.allowed ? 0 : step.retryAfterMs), 0, true)
      allowed = false
    } else {
      steps[i] = step
      toResult(step, results[i])
      if (!step.allowed) allowed = false
    }
  }

  for (let i = 0; i < policies.length; i++) {
    const policy = policies[i]
    const algorithm = ALGORITHM_BY_NAME[policy.algorithm]
    const record = records[i]
    let blockedUntil = record !== undefined && record.blockedUntil > now ? record.blockedUntil : 0
    let state = record?.state
    const step = steps[i]
    steps[i] = undefined
    if (allowed) {
      state = step!.state
    } else if (step !== undefined) {
      if (!step.allowed && cost > 0 && policy.blockMs > 0) {
        blockedUntil = now + policy.blockMs
        const result = results[i]
        result.retryAfterMs = Math.max(result.retryAfterMs, policy.blockMs)
        result.resetMs = Math.max(result.resetMs, policy.blockMs)
      } else if (step.allowed && cost > 0) {
        // The step's own state is not kept when denied, so its buffer takes the peek.
        toResult(algorithm.step(state, now, 0, policy, step), results[i])
      }
    }
    const nextRecord = nextRecords[i]
    nextRecord.blockedUntil = blockedUntil
    nextRecord.state = state
    let ttl = state === undefined ? 1 : algorithm.ttlMs(state, now, policy)
    if (blockedUntil > 0) ttl = Math.max(ttl, blockedUntil - now)
    ttlMs[i] = ttl
  }
  out.allowed = allowed
  return out
}

/**
 * evaluateKeyInto for the usual request on a set of one policy: `cost` > 0 charged on `state` (the
 * record's, with no block running; never `buffer`'s own array) and admitted. Fills `out` as
 * evaluateKeyInto would and answers true; answers false with `out` untouched for anything else: a
 * denial (its block and its peek) is decided on the general path, whose step finds the same
 * answer, a step being pure. The record's new state is `buffer`'s array until its next step.
 */
export function admitOneInto(
  state: State | undefined,
  now: number,
  cost: number,
  policy: Policy,
  out: KeyEvaluation,
  buffer: StepResult,
): boolean {
  const algorithm = ALGORITHM_BY_NAME[policy.algorithm]
  const step = algorithm.step(state, now, cost, policy, buffer)
  if (!step.allowed) return false
  sizeEvaluation(out, 1)
  toResult(step, out.results[0])
  const record = out.records[0]
  record.blockedUntil = 0
  record.state = step.state
  out.ttlMs[0] = algorithm.ttlMs(step.state, now, policy)
  out.allowed = true
  return true
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

/** One result and one record object per policy, created the first time an evaluation needs them. */
export function sizeEvaluation(out: KeyEvaluation, count: number): void {
  const { results, records, ttlMs } = out
  if (results.length === count) return
  if (results.length > count) {
    results.length = count
    records.length = count
    ttlMs.length = count
    return
  }
  while (results.length < count) {
    results.push({ allowed: true, remaining: 0, resetMs: 0, retryAfterMs: 0, delayMs: 0, blocked: false })
    records.push({ blockedUntil: 0, state: undefined })
    ttlMs.push(1)
  }
}

function toResult(step: StepResult, result: PolicyResult): void {
  setResult(result, step.allowed, step.remaining, step.resetMs, step.retryAfterMs, step.delayMs, false)
}

function setResult(
  result: PolicyResult,
  allowed: boolean,
  remaining: number,
  resetMs: number,
  retryAfterMs: number,
  delayMs: number,
  blocked: boolean,
): void {
  result.allowed = allowed
  result.remaining = remaining
  result.resetMs = resetMs
  result.retryAfterMs = retryAfterMs
  result.delayMs = delayMs
  result.blocked = blocked
}
