// Fixed window: counts cost per epoch-aligned window of `periodMs`; its Lua twin scripts/fixed-window.lua is generated from it.
//
// State `[windowStart, count]`: the start of the window the count belongs to (a multiple of
// `periodMs` since the Unix epoch) and the cost admitted in it. A state from an earlier window
// counts as empty. Admits when `count + cost <= limit`. Cheap and exact, but a client may spend
// `limit` at the end of one window and `limit` again at the start of the next.

import type { Policy } from '../policy.js'
import { writeState, writeStep, type Algorithm, type State, type StepResult } from './types.js'

/**
 * The fixed-window algorithm. `resetMs` is always the time to the window's end (when the count
 * restarts); a denied request waits for that too, including a cost above `limit`, which can
 * never pass (the window end is when the policy is fully restored).
 */
export const fixedWindow: Algorithm = {
  name: 'fixed-window',

  step(state: State | undefined, now: number, cost: number, policy: Policy, out?: StepResult): StepResult {
    const { limit, periodMs } = policy
    let windowStart = Math.floor(now / periodMs) * periodMs
    let count = 0
    if (state !== undefined) {
      // A clock that stepped back stays in the stored window rather than opening an earlier one.
      windowStart = Math.max(windowStart, state[0])
      if (state[0] === windowStart) count = state[1]
    }
    const resetMs = windowStart + periodMs - now

    let allowed = true
    if (cost > 0) {
      allowed = count + cost <= limit
      if (allowed) count = count + cost
    } else if (cost < 0) {
      count = Math.max(0, count + cost)
    } else {
      allowed = count <= limit
    }

    const result = writeStep(out, allowed, Math.max(0, Math.floor(limit - count)), resetMs, allowed ? 0 : resetMs, 0)
    writeState(result.state, windowStart, count)
    return result
  },

  ttlMs(state: State, now: number, policy: Policy): number {
    // An empty count is no state at all: a peek at a new key need not be kept.
    if (state[1] === 0) return 1
    return Math.max(1, state[0] + policy.periodMs - now)
  },
}
