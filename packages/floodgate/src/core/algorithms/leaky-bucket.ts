// Leaky bucket, as a meter (policing) or as a queue (shaping); its Lua twin scripts/leaky-bucket.lua is generated from it.
//
// Both forms drain `limit` units per `periodMs` and hold at most `burst` units.
//
// Policing (`shaping: false`): a bucket that leaks continuously. A request pours `cost` units in;
// it is admitted when they fit (`level + cost <= burst`), else rejected and nothing is kept. State
// `[level, lastMs, periodMs]`: the level at `lastMs`, counted in drops of 1/periodMs unit so that
// exactly `limit` drops leak per millisecond and every number is a whole number (exact in both
// executors while burst × periodMs < 2^53), and the period the drops were counted in, so a
// reloaded policy with another period reads the same number of units (rounded up).
//
// Shaping (`shaping: true`): a FIFO queue served one unit per interval (`periodMs / limit`), by
// virtual scheduling: only the queue's tail is kept — when it will have served everything admitted
// so far. A request of cost c starts at `start = max(now, tail)`, waits `delayMs = ceil(start -
// now)`, and moves the tail to `start + c × interval`. It is rejected when the queue would hold
// more than `burst` units: `tail - now + c × interval > burst × interval`, i.e. the units still
// queued (those being served count until done) plus c exceed `burst`. That tail is exactly GCRA's
// theoretical arrival time, so shaping runs gcra.ts (state `[tailMs, tailTicks, limit]`, in ticks
// of 1/limit ms) and adds the delay.
//
// Admission is the same in both forms (and the same as GCRA's: the three are one rate, seen as a
// level, a queue and a schedule); shaping adds the delay, and so admits a steady stream evenly.

import type { Policy } from '../policy.js'
import { writeState, writeStep, type Algorithm, type State, type StepResult } from './types.js'
import { gcra } from './gcra.js'

/**
 * The leaky-bucket algorithm, policing or shaping by `policy.shaping` (see above).
 *
 * - `remaining`: whole units that still fit; `resetMs`: until the bucket is empty / the queue has
 *   drained; `retryAfterMs`: until this cost fits. A cost above `burst` never fits; it gets
 *   `resetMs`, the time until the bucket is empty (0 when it already is).
 * - `delayMs` (shaping): how long an admitted request waits for its turn; 0 for peeks, refunds and
 *   denials, and always 0 when policing.
 * - Refunds take units out (the newest in the queue), never below empty.
 */
export const leakyBucket: Algorithm = {
  name: 'leaky-bucket',

  step(state: State | undefined, now: number, cost: number, policy: Policy, out?: StepResult): StepResult {
    return policy.shaping ? leakyBucketShape(state, now, cost, policy, out) : leakyBucketPolice(state, now, cost, policy, out)
  },

  ttlMs(state: State, now: number, policy: Policy): number {
    if (policy.shaping) return gcra.ttlMs(state, now, policy)
    return Math.max(1, state[1] + Math.ceil(leakyBucketStoredLevel(state, policy.periodMs) / policy.limit) - now)
  },
}

/** Policing: admit when the cost fits in the bucket, else reject. */
function leakyBucketPolice(state: State | undefined, now: number, cost: number, policy: Policy, out: StepResult | undefined): StepResult {
  const { limit, periodMs, burst } = policy
  const capacity = burst * periodMs
  let lastMs = now
  let level = 0
  if (state !== undefined) {
    // A clock that stepped back leaks nothing rather than leaking the same time twice.
    lastMs = Math.max(now, state[1])
    level = Math.max(0, leakyBucketStoredLevel(state, periodMs) - (lastMs - state[1]) * limit)
  }

  let allowed = true
  if (cost > 0) {
    allowed = level + cost * periodMs <= capacity
    if (allowed) level = level + cost * periodMs
  } else if (cost < 0) {
    level = Math.max(0, level + cost * periodMs)
  } else {
    allowed = level <= capacity
  }

  const resetMs = lastMs + Math.ceil(level / limit) - now
  let retryAfterMs = 0
  if (!allowed) retryAfterMs = cost > burst ? resetMs : lastMs + Math.ceil((level + cost * periodMs - capacity) / limit) - now
  const result = writeStep(out, allowed, Math.max(0, Math.floor((capacity - level) / periodMs)), resetMs, retryAfterMs, 0)
  writeState(result.state, level, lastMs, periodMs)
  return result
}

/**
 * Shaping: the queue's tail is GCRA's theoretical arrival time, so admission, results and state are
 * GCRA's; shaping adds the wait for this request's turn.
 */
function leakyBucketShape(state: State | undefined, now: number, cost: number, policy: Policy, out: StepResult | undefined): StepResult {
  const result = gcra.step(state, now, cost, policy, out)
  if (result.allowed && cost > 0) {
    // The turn comes where the tail stood before this request: the new tail less its own service.
    const { limit, periodMs } = policy
    result.delayMs = Math.ceil(((result.state[0] - now) * limit + result.state[1] - cost * periodMs) / limit)
  }
  return result
}

/** The stored level in drops of 1/periodMs unit; drops counted under another period are converted (rounded up). */
export function leakyBucketStoredLevel(state: State, periodMs: number): number {
  if (state[2] !== periodMs) return Math.ceil((state[0] * periodMs) / state[2])
  return state[0]
}
