// GCRA, the Generic Cell Rate Algorithm (as redis-cell and Brandur's throttled); its Lua twin scripts/gcra.lua is generated from it.
//
// Every admitted unit pushes a theoretical arrival time (TAT) forward by one emission interval
// (`periodMs / limit`); a request is admitted when, after pushing, the TAT runs at most the
// tolerance (`burst` intervals) ahead of now. So `burst` units may pass at once, then one per
// interval. It is the token bucket seen from the other side, with nothing to refill.
//
// Exactness. The interval is rarely a whole number (1000 ms / 3), and a TAT kept as one double
// near 1.7e12 ms is rounded at every step (ulp ≈ 0.00024 ms), so a burst of exactly `burst` could
// fail by a rounding. So times are counted in *ticks* of 1/limit ms, in which the interval is
// `periodMs` and the tolerance `burst × periodMs`: whole numbers, exact in both executors while
// `periodMs × max(limit, burst)` < 2^53 (any sane policy). The TAT is stored as
// `[tatMs, tatTicks, limit]`: whole milliseconds plus a fraction of `tatTicks` < limit ticks, and
// the limit those ticks were counted in — a reloaded policy with another limit rounds the
// fraction up to the next millisecond instead of misreading it.

import type { Policy } from '../policy.js'
import { writeState, writeStep, type Algorithm, type State, type StepResult } from './types.js'

/**
 * The GCRA algorithm, state `[tatMs, tatTicks, limit]` (see above).
 *
 * - `remaining`: whole units that could pass now; `resetMs`: until the TAT is reached (the policy
 *   fully restored); `retryAfterMs`: until the TAT has fallen back enough for this cost.
 * - A denied request reports the state it saw (nothing charged). A cost above `burst` can never
 *   pass; its `retryAfterMs` is `resetMs`, the time until fully restored (0 on a fresh key).
 * - Refunds pull the TAT back, never before now (a fresh state).
 * - A clock that steps back sees the TAT further ahead: stricter, never looser.
 */
export const gcra: Algorithm = {
  name: 'gcra',

  step(state: State | undefined, now: number, cost: number, policy: Policy, out?: StepResult): StepResult {
    const { limit, periodMs, burst } = policy
    const tolerance = burst * periodMs
    // How far the TAT is ahead of now, in ticks; 0 when it is already past.
    const lag = state === undefined ? 0 : Math.max(0, gcraLag(state, now, limit))

    let allowed = true
    let lagAfter = lag
    if (cost > 0) {
      allowed = lag + cost * periodMs <= tolerance
      if (allowed) lagAfter = lag + cost * periodMs
    } else if (cost < 0) {
      lagAfter = Math.max(0, lag + cost * periodMs)
    } else {
      allowed = lag <= tolerance
    }

    const resetMs = Math.ceil(lagAfter / limit)
    let retryAfterMs = 0
    if (!allowed) retryAfterMs = cost > burst ? resetMs : Math.ceil((lag + cost * periodMs - tolerance) / limit)
    // The TAT, split back into whole ms and ticks (the TAT itself when nothing was charged).
    const aheadMs = Math.floor(lagAfter / limit)
    const result = writeStep(out, allowed, Math.max(0, Math.floor((tolerance - lagAfter) / periodMs)), resetMs, retryAfterMs, 0)
    writeState(result.state, now + aheadMs, lagAfter - aheadMs * limit, limit)
    return result
  },

  ttlMs(state: State, now: number, policy: Policy): number {
    return Math.max(1, Math.ceil(gcraLag(state, now, policy.limit) / policy.limit))
  },
}

/**
 * How far the stored TAT is ahead of `now`, in ticks of 1/limit ms (≤ 0: already past). Ticks
 * counted under another limit (a reloaded policy) round up to the next whole millisecond.
 */
export function gcraLag(state: State, now: number, limit: number): number {
  if (state[2] !== limit && state[1] > 0) return (state[0] + 1 - now) * limit
  return (state[0] - now) * limit + state[1]
}
