// Proofs for the sliding-window (weighted two-window) algorithm: examples, a full-log reference
// with exact waits found by search, ttl, and its Lua twin.

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import { slidingWindow } from '../../../src/core/algorithms/sliding-window.js'
import type { State } from '../../../src/core/algorithms/types.js'
import type { Policy } from '../../../src/core/policy.js'
import {
  START,
  arbTrace,
  assertPeekKeepsState,
  assertRetryAfterExact,
  assertWellFormed,
  policyFor,
  replay,
  useRedis,
  itForgetsAfterTtl,
  itMatchesLuaTwin,
} from './support.js'

const ten = policyFor('sliding-window', 10, 1_000)
const three = policyFor('sliding-window', 3, 1_000)

/** Steps through (offset from START, cost) pairs from `state`, committing allowed states. */
function run(policy: Policy, steps: [number, number][], state?: State) {
  return steps.map(([at, cost]) => {
    const result = slidingWindow.step(state, START + at, cost, policy)
    if (result.allowed) state = result.state
    return result
  })
}

describe('sliding-window: examples', () => {
  it('weighs the previous window by how much of it still overlaps the rolling window', () => {
    // 10 in the previous window, 250 ms into this one: the estimate is 7.5, so 2 more fit.
    const results = run(
      ten,
      [
        [250, 1],
        [250, 1],
        [250, 1],
      ],
      [START - 1_000, 10, 0],
    )
    assert.deepEqual(
      results.map((r) => r.allowed),
      [true, true, false],
    )
    assert.deepEqual(
      results.map((r) => r.remaining),
      [1, 0, 0],
    )
    // 10 * (1000 - x) / 1000 + 3 <= 10 from x = 300.
    assert.equal(results[2].retryAfterMs, 50)
  })

  it('waits into the next window when the current count alone is too high', () => {
    const results = run(three, [
      [100, 3],
      [400, 1],
    ])
    assert.equal(results[1].allowed, false)
    // Next window: 3 * (1000 - y) / 1000 + 1 <= 3 from y = 334 (333.3 rounded up).
    assert.equal(results[1].retryAfterMs, 600 + 334)
    assert.equal(run(three, [[1_333, 1]], [START, 3, 0])[0].allowed, false)
    assert.equal(run(three, [[1_334, 1]], [START, 3, 0])[0].allowed, true)
  })

  it('is fully restored at the end of the next window, and forgets its state then', () => {
    const [result] = run(three, [[100, 2]])
    assert.equal(result.resetMs, 1_900)
    assert.equal(slidingWindow.ttlMs(result.state, START + 100, three), 1_900)
    assert.equal(slidingWindow.ttlMs([START, 0, 2], START + 100, three), 900)
  })

  it('denies a cost above the limit, waiting until fully restored', () => {
    const [result] = run(three, [[100, 4]], [START, 1, 0])
    assert.equal(result.allowed, false)
    assert.equal(result.retryAfterMs, 1_900)
    assert.equal(result.retryAfterMs, result.resetMs)
  })

  it('peeks without charging; a peek is denied only beyond the limit', () => {
    const [atLimit] = run(three, [[10, 0]], [START, 3, 0])
    assert.deepEqual([atLimit.allowed, atLimit.remaining, atLimit.state], [true, 0, [START, 3, 0]])
    const [beyond] = run(three, [[10, 0]], [START, 4, 0])
    assert.equal(beyond.allowed, false)
    // Next window: 4 * (1000 - y) / 1000 <= 3 from y = 250.
    assert.equal(beyond.retryAfterMs, 990 + 250)
  })

  it('refunds the current count first, then the previous window, never below fresh', () => {
    const [partial] = run(ten, [[500, -3]], [START, 2, 6])
    assert.deepEqual(partial.state, [START, 0, 5])
    const [all] = run(ten, [[500, -20]], [START, 2, 6])
    assert.deepEqual(all.state, [START, 0, 0])
    assert.equal(all.remaining, 10)
    assert.equal(all.resetMs, 0)
  })

  it('rolls the count into the previous window, and drops it a window later', () => {
    assert.deepEqual(run(ten, [[1_200, 0]], [START, 4, 9])[0].state, [START + 1_000, 0, 4])
    assert.deepEqual(run(ten, [[2_000, 0]], [START, 4, 9])[0].state, [START + 2_000, 0, 0])
  })
})

interface Entry {
  t: number
  cost: number
}

/** What the log holds in the aligned windows around `now`, in request-ms (estimate × periodMs). */
function usedAt(log: readonly Entry[], now: number, periodMs: number): number {
  const window = Math.floor(now / periodMs)
  let current = 0
  let previous = 0
  for (const { t, cost } of log) {
    if (Math.floor(t / periodMs) === window) current += cost
    else if (Math.floor(t / periodMs) === window - 1) previous += cost
  }
  return previous * (periodMs - (now - window * periodMs)) + current * periodMs
}

/** The earliest t ≥ now with usedAt(t) ≤ bound, by binary search (the estimate never grows). */
function earliest(log: readonly Entry[], now: number, periodMs: number, bound: number): number {
  let lo = now
  let hi = now + 2 * periodMs
  while (lo < hi) {
    const mid = Math.floor((lo + hi) / 2)
    if (usedAt(log, mid, periodMs) <= bound) hi = mid
    else lo = mid + 1
  }
  return lo
}

/** Removes `units` from the newest entries of the current window, then of the previous one. */
function refund(log: Entry[], now: number, periodMs: number, units: number): void {
  const window = Math.floor(now / periodMs)
  for (const w of [window, window - 1]) {
    for (let i = log.length - 1; i >= 0 && units > 0; i--) {
      if (Math.floor(log[i].t / periodMs) !== w) continue
      const taken = Math.min(units, log[i].cost)
      log[i].cost -= taken
      units -= taken
    }
  }
}

/** The full-log reference: every admitted request kept with its time; the estimate recomputed each step. */
function referenceDecisions(policy: Policy, steps: { now: number; cost: number }[]) {
  const { limit, periodMs } = policy
  const capacity = limit * periodMs
  const log: Entry[] = []
  return steps.map(({ now, cost }) => {
    const used = usedAt(log, now, periodMs)
    let allowed = true
    if (cost > 0) allowed = used + cost * periodMs <= capacity
    else if (cost === 0) allowed = used <= capacity
    let retryAfterMs = 0
    if (!allowed && cost <= limit) retryAfterMs = earliest(log, now, periodMs, capacity - cost * periodMs) - now
    if (allowed && cost > 0) log.push({ t: now, cost })
    if (cost < 0) refund(log, now, periodMs, -cost)
    const after = usedAt(log, now, periodMs)
    const resetMs = earliest(log, now, periodMs, 0) - now
    if (!allowed && cost > limit) retryAfterMs = resetMs
    return { allowed, remaining: Math.max(0, Math.floor((capacity - after) / periodMs)), resetMs, retryAfterMs }
  })
}

describe('sliding-window: properties', () => {
  it('decides as a full-log reference does, with the same exact waits and well-formed results', () => {
    fc.assert(
      fc.property(arbTrace('sliding-window'), (trace) => {
        const steps = replay(slidingWindow, trace)
        const expected = referenceDecisions(trace.policy, steps)
        steps.forEach(({ result }, i) => {
          assertWellFormed(result)
          const { allowed, remaining, resetMs, retryAfterMs } = result
          assert.deepEqual({ allowed, remaining, resetMs, retryAfterMs }, expected[i], `step ${i}`)
        })
        assertRetryAfterExact(slidingWindow, steps, trace.policy, trace.policy.limit)
        assertPeekKeepsState(slidingWindow, steps, trace.policy)
      }),
      { numRuns: 300 },
    )
  })

  itForgetsAfterTtl(slidingWindow)
})

describe('sliding-window: the Lua twin', () => {
  const redis = useRedis()

  itMatchesLuaTwin(redis, slidingWindow)
})
