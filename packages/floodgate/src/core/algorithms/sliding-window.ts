// Sliding window (weighted two-window counter); its Lua twin scripts/sliding-window.lua is generated from it.
//
// State `[windowStart, count, previousCount]`: the current epoch-aligned window, the cost admitted
// in it, and the cost admitted in the window before. The rolling usage is estimated as
// `previousCount * (periodMs - elapsed) / periodMs + count` (elapsed = now - windowStart), as
// Cloudflare and nginx describe it: the previous window's requests are assumed evenly spread, so
// its weight decays linearly to 0 over the current window. Admits when `estimate + cost <= limit`.
//
// To keep every decision exact, the estimate is compared multiplied by `periodMs`
// ("request-milliseconds"): `previousCount * (periodMs - elapsed) + count * periodMs` is a sum of
// integer products, so TypeScript, Lua and the tests' rational reference agree to the last unit.

import type { Policy } from '../policy.js'
import { writeState, writeStep, type Algorithm, type State, type StepResult } from './types.js'

/**
 * The sliding-window algorithm. `resetMs` is the time until the estimate is back to 0 (the end of
 * the next window while the current one has a count). `retryAfterMs` is the exact earliest time the
 * same cost passes; a cost above `limit` never passes and gets `resetMs`.
 */
export const slidingWindow: Algorithm = {
  name: 'sliding-window',

  step(state: State | undefined, now: number, cost: number, policy: Policy, out?: StepResult): StepResult {
    const { limit, periodMs } = policy
    let windowStart = Math.floor(now / periodMs) * periodMs
    let count = 0
    let previousCount = 0
    if (state !== undefined) {
      // A clock that stepped back stays in the stored window rather than opening an earlier one.
      windowStart = Math.max(windowStart, state[0])
      if (state[0] === windowStart) {
        count = state[1]
        previousCount = state[2]
      } else if (state[0] === windowStart - periodMs) {
        previousCount = state[1]
      }
    }
    const elapsed = Math.max(0, now - windowStart)
    const capacity = limit * periodMs
    const used = previousCount * (periodMs - elapsed) + count * periodMs

    let allowed = true
    if (cost > 0) {
      allowed = used + cost * periodMs <= capacity
      if (allowed) count = count + cost
    } else if (cost < 0) {
      // Refunds come off the newest count first; what is left comes off the previous window.
      count = count + cost
      if (count < 0) {
        previousCount = Math.max(0, previousCount + count)
        count = 0
      }
    } else {
      allowed = used <= capacity
    }

    const usedAfter = previousCount * (periodMs - elapsed) + count * periodMs
    const resetMs = Math.max(0, slidingWindowRestoredAt(windowStart, count, previousCount, periodMs) - now)
    let retryAfterMs = 0
    if (!allowed) {
      retryAfterMs = cost > limit ? resetMs : slidingWindowPassesAt(windowStart, count, previousCount, cost, policy) - now
    }
    const result = writeStep(out, allowed, Math.max(0, Math.floor((capacity - usedAfter) / periodMs)), resetMs, retryAfterMs, 0)
    writeState(result.state, windowStart, count, previousCount)
    return result
  },

  ttlMs(state: State, now: number, policy: Policy): number {
    return Math.max(1, slidingWindowRestoredAt(state[0], state[1], state[2], policy.periodMs) - now)
  },
}

/** When the estimate reaches 0: the current count weighs until the end of the next window. */
export function slidingWindowRestoredAt(windowStart: number, count: number, previousCount: number, periodMs: number): number {
  if (count > 0) return windowStart + 2 * periodMs
  if (previousCount > 0) return windowStart + periodMs
  return windowStart
}

/**
 * The earliest whole millisecond at which `cost` (≤ limit) passes, nothing else happening.
 * `excess` is how far the counts alone overshoot: if they fit (excess ≤ 0) the previous window's
 * weight must decay until `previousCount * (periodMs - x) <= -excess * periodMs`, within this
 * window; otherwise the current count becomes the next window's previous count and must decay
 * until `count * (periodMs - y) <= (limit - cost) * periodMs`.
 */
export function slidingWindowPassesAt(windowStart: number, count: number, previousCount: number, cost: number, policy: Policy): number {
  const { limit, periodMs } = policy
  const excess = count + cost - limit
  if (excess <= 0) {
    return windowStart + Math.ceil((periodMs * (previousCount + excess)) / previousCount)
  }
  return windowStart + periodMs + Math.ceil((periodMs * excess) / count)
}
