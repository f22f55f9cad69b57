// The contract every algorithm module meets, in TypeScript here and in Lua in src/stores/redis/scripts/
// (generated from these modules by scripts/gen-algorithms.mjs).

import type { AlgorithmName, Policy } from '../policy.js'

/**
 * An algorithm's state: a short flat array of numbers (timestamps in ms, counters, tokens).
 * Flat so that the Lua twin stores exactly the same numbers (as doubles, so they round-trip) and
 * the memory store keeps it without boxing, updating it in place.
 */
export type State = number[]

/** What one step decides for one policy. Every number is a whole number ≥ 0. */
export interface StepResult {
  allowed: boolean
  /** Units still available after this step (floored). */
  remaining: number
  /** Milliseconds until the policy is fully restored / its window ends (ceiled). */
  resetMs: number
  /** 0 when allowed; otherwise the exact wait until this cost would pass (ceiled). */
  retryAfterMs: number
  /** Shaping (leaky-bucket with `shaping`): how long the admitted request should wait; else 0. */
  delayMs: number
  /**
   * The state to store if the step is committed. With a caller's `out`, this is `out.state`
   * rewritten in place: copy the numbers (or keep the array and give `out` another) to keep them.
   */
  state: State
}

/**
 * One algorithm: pure, no I/O, no clock.
 *
 * `step(state, now, cost, policy, out?)`:
 * - `state` is `undefined` when the key has none (new, or expired after `ttlMs`). It is only read.
 * - `out`, when given, receives the result: every field is overwritten and `out.state` is rewritten
 *   in place (resized), so a store deciding many requests allocates no result and no state per
 *   step. `out.state` must not be the `state` array itself. Without `out` the result is new; the
 *   numbers are the same either way, and the result is returned. The Lua twins take `out` the same
 *   way (prelude.lua's createStepResult and copyState mirror this file's helpers).
 * - `cost > 0` charges; `cost === 0` peeks (never changes state; allowed unless the key is
 *   already beyond its limit, as Envoy's hits_addend 0); `cost < 0` refunds `-cost` units
 *   (always allowed; never restores beyond a fresh state).
 * - `now` is whole milliseconds since the Unix epoch.
 *
 * `ttlMs(state, now, policy)`: whole milliseconds (≥ 1) after which the state is equivalent to no
 * state at all — stepping it at any later time gives the same result as stepping `undefined`.
 * Stores drop state after it (Redis PEXPIRE, memory store lazily). For the state an allowed step
 * returns, it is at most max(1, resetMs): the Redis runner relies on that to keep a key's expiry
 * without computing the ttl (test/stores/redis/equivalence.test.ts holds every algorithm to it).
 */
export interface Algorithm {
  readonly name: AlgorithmName
  step(state: State | undefined, now: number, cost: number, policy: Policy, out?: StepResult): StepResult
  ttlMs(state: State, now: number, policy: Policy): number
}

/** A result with an empty state, for a caller to pass as `out` again and again. */
export function createStepResult(): StepResult {
  return { allowed: true, remaining: 0, resetMs: 0, retryAfterMs: 0, delayMs: 0, state: [] }
}

/**
 * Writes a step's outcome into `out` (a new result when there is none) and returns it; the
 * algorithm then writes its state into `result.state` with `writeState` or `copyState`. The Lua
 * twins inline it (scripts/gen-algorithms.mjs): a call is dear in Redis's Lua, not in V8.
 */
export function writeStep(
  out: StepResult | undefined,
  allowed: boolean,
  remaining: number,
  resetMs: number,
  retryAfterMs: number,
  delayMs: number,
): StepResult {
  const result = out ?? createStepResult()
  result.allowed = allowed
  result.remaining = remaining
  result.resetMs = resetMs
  result.retryAfterMs = retryAfterMs
  result.delayMs = delayMs
  return result
}

/**
 * Makes `state` the two or three numbers given, in place: the state write of a short-state step
 * (the Lua twin inlines it as element assignments).
 */
export function writeState(state: State, a: number, b: number, c?: number): void {
  state[0] = a
  state[1] = b
  if (c === undefined) {
    if (state.length !== 2) state.length = 2
    return
  }
  state[2] = c
  if (state.length !== 3) state.length = 3
}

/** Makes `state` a copy of `numbers`, in place. */
export function copyState(state: State, numbers: readonly number[]): void {
  for (let i = 0; i < numbers.length; i++) state[i] = numbers[i]
  if (state.length !== numbers.length) state.length = numbers.length
}
