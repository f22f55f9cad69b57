// Sliding log: an exact rolling window over a log of admitted requests; its Lua twin scripts/sliding-log.lua is generated from it.
//
// State `[t1, c1, t2, c2, ...]`: the timestamps (ascending) and costs of the requests admitted in
// the last `periodMs`, i.e. with `t > now - periodMs`. Requests admitted in the same millisecond
// share one pair, so the log holds at most `limit` pairs. Admits when the logged cost plus `cost`
// is at most `limit`, so no rolling window of `periodMs` ever holds more than `limit` — at the price
// of memory and time proportional to the requests in the window.

import type { Policy } from '../policy.js'
import { createStepResult, writeStep, type Algorithm, type State, type StepResult } from './types.js'

/**
 * The sliding-log algorithm. `resetMs` is the time until the newest entry leaves the window;
 * `retryAfterMs` the exact time until enough of the oldest entries have left for the same cost to
 * fit. A cost above `limit` never passes and gets `resetMs`. Refunds take cost off the newest
 * entries first (a refund usually follows the request it undoes).
 */
export const slidingLog: Algorithm = {
  name: 'sliding-log',

  step(state: State | undefined, now: number, cost: number, policy: Policy, out?: StepResult): StepResult {
    const { limit, periodMs } = policy
    // The log is written straight into the result's state: a reused `out` keeps its array's room,
    // so a long log costs one pass over the stored one, not a new array grown entry by entry and
    // then copied.
    const result = out ?? createStepResult()
    const log = result.state
    let n = 0
    let at = now
    let used = 0
    if (state !== undefined) {
      // A clock that stepped back logs at the newest time seen, which keeps the log in order.
      if (state.length > 0) at = Math.max(now, state[state.length - 2])
      for (let i = 0; i < state.length; i += 2) {
        if (state[i] > at - periodMs) {
          log[n] = state[i]
          log[n + 1] = state[i + 1]
          n = n + 2
          used = used + state[i + 1]
        }
      }
    }

    let allowed = true
    if (cost > 0) {
      allowed = used + cost <= limit
      if (allowed) {
        if (n > 0 && log[n - 2] === at) {
          log[n - 1] = log[n - 1] + cost
        } else {
          log[n] = at
          log[n + 1] = cost
          n = n + 2
        }
        used = used + cost
      }
    } else if (cost < 0) {
      let refund = -cost
      while (refund > 0 && n > 0) {
        const newest = log[n - 1]
        if (newest <= refund) {
          refund = refund - newest
          n = n - 2
        } else {
          log[n - 1] = newest - refund
          refund = 0
        }
      }
      used = Math.max(0, used + cost)
    } else {
      allowed = used <= limit
    }
    if (log.length !== n) log.length = n

    const resetMs = n === 0 ? 0 : log[n - 2] + periodMs - now
    let retryAfterMs = 0
    if (!allowed) {
      retryAfterMs = cost > limit ? resetMs : slidingLogPassesAt(log, used, cost, policy) - now
    }
    writeStep(result, allowed, Math.max(0, Math.floor(limit - used)), resetMs, retryAfterMs, 0)
    return result
  },

  ttlMs(state: State, now: number, policy: Policy): number {
    if (state.length === 0) return 1
    return Math.max(1, state[state.length - 2] + policy.periodMs - now)
  },
}

/**
 * When enough of the oldest entries have left the window for `cost` (≤ limit) to fit: an entry
 * logged at `t` leaves at `t + periodMs`.
 */
function slidingLogPassesAt(log: readonly number[], used: number, cost: number, policy: Policy): number {
  let left = used
  let i = 0
  while (left + cost > policy.limit) {
    left = left - log[i + 1]
    i = i + 2
  }
  return log[i - 2] + policy.periodMs
}
