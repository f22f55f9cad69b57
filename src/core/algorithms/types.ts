// The contract every algorithm module meets, in TypeScript here and in Lua in src/stores/redis/scripts/.

import type { AlgorithmName, Policy } from '../policy.js'

/**
 * An algorithm's state: a short flat array of numbers (timestamps in ms, counters, tokens).
 * Flat so that the Lua twin stores exactly the same numbers (serialized with %.17g, so doubles
 * round-trip) and the memory store keeps it without boxing.
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
  /** The state to store if the step is committed. */
  state: State
}

/**
 * One algorithm: pure, no I/O, no clock.
 *
 * `step(state, now, cost, policy)`:
 * - `state` is `undefined` when the key has none (new, or expired after `ttlMs`).
 * - `cost > 0` charges; `cost === 0` peeks (never changes state; allowed unless the key is
 *   already beyond its limit, as Envoy's hits_addend 0); `cost < 0` refunds `-cost` units
 *   (always allowed; never restores beyond a fresh state).
 * - `now` is whole milliseconds since the Unix epoch.
 *
 * `ttlMs(state, now, policy)`: whole milliseconds (≥ 1) after which the state is equivalent to no
 * state at all — stepping it at any later time gives the same result as stepping `undefined`.
 * Stores drop state after it (Redis PEXPIRE, memory store lazily).
 */
export interface Algorithm {
  readonly name: AlgorithmName
  step(state: State | undefined, now: number, cost: number, policy: Policy): StepResult
  ttlMs(state: State, now: number, policy: Policy): number
}
