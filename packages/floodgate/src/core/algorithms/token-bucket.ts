// Token bucket with lazy refill; its Lua twin scripts/token-bucket.lua is generated from it.
//
// A bucket holds up to `burst` tokens and refills at `limit / periodMs` tokens per millisecond; a
// request takes `cost` tokens and passes when the bucket has them. Nothing runs between requests:
// each step first adds what accrued since the last one.
//
// State `[level, lastMs]`: the tokens at `lastMs`, counted in token-milliseconds (tokens ×
// periodMs). In that unit one millisecond adds exactly `limit`, a request takes `cost * periodMs`
// and the bucket holds `burst * periodMs`, so every number is an exact integer (while
// burst × periodMs < 2^53, e.g. a burst of 10 million per week) and TypeScript, Lua and exact
// rational arithmetic make the same decisions. Counting in fractional tokens instead drifts by
// rounding: a bucket would hold 0.9999999 tokens exactly when it was promised one.

import type { Policy } from '../policy.js'
import { writeState, writeStep, type Algorithm, type State, type StepResult } from './types.js'

/**
 * The token-bucket algorithm. `resetMs` is the time until the bucket is full again;
 * `retryAfterMs` the exact time until it holds `cost` tokens. A cost above `burst` never passes
 * and gets `resetMs`. A peek always passes (a bucket never holds fewer than zero tokens).
 */
export const tokenBucket: Algorithm = {
  name: 'token-bucket',

  step(state: State | undefined, now: number, cost: number, policy: Policy, out?: StepResult): StepResult {
    const { limit, periodMs, burst } = policy
    const capacity = burst * periodMs
    let at = now
    let level = capacity
    if (state !== undefined) {
      // A clock that stepped back refills nothing rather than refilling the same time twice.
      at = Math.max(now, state[1])
      level = Math.min(capacity, state[0] + (at - state[1]) * limit)
    }

    let allowed = true
    if (cost > 0) {
      allowed = level >= cost * periodMs
      if (allowed) level = level - cost * periodMs
    } else if (cost < 0) {
      level = Math.min(capacity, level - cost * periodMs)
    }

    const resetMs = at + Math.ceil((capacity - level) / limit) - now
    let retryAfterMs = 0
    if (!allowed) {
      retryAfterMs = cost > burst ? resetMs : at + Math.ceil((cost * periodMs - level) / limit) - now
    }
    const result = writeStep(out, allowed, Math.max(0, Math.floor(level / periodMs)), resetMs, retryAfterMs, 0)
    writeState(result.state, level, at)
    return result
  },

  ttlMs(state: State, now: number, policy: Policy): number {
    const capacity = policy.burst * policy.periodMs
    return Math.max(1, state[1] + Math.ceil((capacity - state[0]) / policy.limit) - now)
  },
}
