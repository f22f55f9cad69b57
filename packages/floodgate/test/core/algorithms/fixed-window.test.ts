// Proofs for the fixed-window algorithm: examples, a per-window reference, ttl, and its Lua twin.

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import { fixedWindow } from '../../../src/core/algorithms/fixed-window.js'
import type { State } from '../../../src/core/algorithms/types.js'
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

const policy = policyFor('fixed-window', 3, 1_000)

/** Steps through (offset from START, cost) pairs, committing allowed states; returns every result. */
function run(steps: [number, number][]) {
  let state: State | undefined
  return steps.map(([at, cost]) => {
    const result = fixedWindow.step(state, START + at, cost, policy)
    if (result.allowed) state = result.state
    return result
  })
}

describe('fixed-window: examples', () => {
  it('admits limit per window, then denies until the window ends', () => {
    const results = run([
      [0, 1],
      [100, 1],
      [200, 1],
      [300, 1],
    ])
    assert.deepEqual(
      results.map((r) => r.allowed),
      [true, true, true, false],
    )
    assert.deepEqual(
      results.map((r) => r.remaining),
      [2, 1, 0, 0],
    )
    assert.equal(results[3].retryAfterMs, 700)
    assert.equal(results[3].resetMs, 700)
  })

  it('aligns windows to the epoch: 999 and 1000 ms after a whole second are different windows', () => {
    const results = run([
      [999, 3],
      [999, 1],
      [1_000, 3],
    ])
    assert.deepEqual(
      results.map((r) => r.allowed),
      [true, false, true],
    )
    assert.equal(results[1].retryAfterMs, 1)
    assert.equal(results[2].resetMs, 1_000)
  })

  it('lets a denied cost through exactly at now + retryAfterMs', () => {
    const [, denied] = run([
      [250, 3],
      [400, 2],
    ])
    assert.equal(denied.allowed, false)
    const state = [START, 3]
    assert.equal(fixedWindow.step(state, START + 400 + denied.retryAfterMs - 1, 2, policy).allowed, false)
    assert.equal(fixedWindow.step(state, START + 400 + denied.retryAfterMs, 2, policy).allowed, true)
  })

  it('denies a cost above the limit, with the window end as its wait', () => {
    const [result] = run([[100, 4]])
    assert.equal(result.allowed, false)
    assert.equal(result.retryAfterMs, 900)
    assert.equal(result.remaining, 3)
  })

  it('peeks without charging, and still allows a peek at exactly the limit', () => {
    const results = run([
      [0, 3],
      [10, 0],
      [20, 0],
    ])
    assert.deepEqual(
      results.map((r) => [r.allowed, r.remaining]),
      [
        [true, 0],
        [true, 0],
        [true, 0],
      ],
    )
    assert.deepEqual(results[2].state, [START, 3])
  })

  it('denies a peek when the count is beyond the limit (a state written under a larger limit)', () => {
    const result = fixedWindow.step([START, 5], START + 10, 0, policy)
    assert.equal(result.allowed, false)
    assert.equal(result.retryAfterMs, 990)
  })

  it('refunds units, never below a fresh window', () => {
    const results = run([
      [0, 3],
      [10, -2],
      [20, 2],
      [30, -10],
    ])
    assert.deepEqual(
      results.map((r) => [r.allowed, r.remaining]),
      [
        [true, 0],
        [true, 2],
        [true, 0],
        [true, 3],
      ],
    )
    assert.deepEqual(results[3].state, [START, 0])
  })

  it('forgets the state at the window end', () => {
    const [result] = run([[400, 2]])
    assert.equal(fixedWindow.ttlMs(result.state, START + 400, policy), 600)
    assert.equal(fixedWindow.ttlMs(result.state, START + 5_000, policy), 1)
    // A peek at a new key leaves nothing worth keeping.
    const peek = fixedWindow.step(undefined, START + 400, 0, policy)
    assert.equal(fixedWindow.ttlMs(peek.state, START + 400, policy), 1)
  })

  it('stays in the stored window when the clock steps back across a window edge', () => {
    const state = [START + 1_000, 3]
    const result = fixedWindow.step(state, START + 998, 1, policy)
    assert.equal(result.allowed, false)
    assert.equal(result.retryAfterMs, 1_002)
  })
})

/** A per-window ledger: the sum admitted in each aligned window, refunds taken off the current one. */
function referenceDecisions(limit: number, periodMs: number, steps: { now: number; cost: number }[]) {
  const sums = new Map<number, number>()
  return steps.map(({ now, cost }) => {
    const window = Math.floor(now / periodMs)
    const sum = sums.get(window) ?? 0
    let allowed = true
    let after = sum
    if (cost > 0) {
      allowed = sum + cost <= limit
      if (allowed) after = sum + cost
    } else if (cost < 0) {
      after = Math.max(0, sum + cost)
    }
    sums.set(window, after)
    return { allowed, remaining: limit - after, resetMs: (window + 1) * periodMs - now }
  })
}

describe('fixed-window: properties', () => {
  it('decides exactly as a per-window ledger, with well-formed, exact results', () => {
    fc.assert(
      fc.property(arbTrace('fixed-window'), (trace) => {
        const steps = replay(fixedWindow, trace)
        const expected = referenceDecisions(trace.policy.limit, trace.policy.periodMs, steps)
        steps.forEach(({ result }, i) => {
          assertWellFormed(result)
          assert.deepEqual({ allowed: result.allowed, remaining: result.remaining, resetMs: result.resetMs }, expected[i])
        })
        assertRetryAfterExact(fixedWindow, steps, trace.policy, trace.policy.limit)
        assertPeekKeepsState(fixedWindow, steps, trace.policy)
      }),
      { numRuns: 300 },
    )
  })

  it('never admits more than limit in one aligned window', () => {
    fc.assert(
      fc.property(arbTrace('fixed-window', { refunds: false }), (trace) => {
        const admitted = new Map<number, number>()
        for (const { now, cost, result } of replay(fixedWindow, trace)) {
          if (!result.allowed) continue
          const window = Math.floor(now / trace.policy.periodMs)
          admitted.set(window, (admitted.get(window) ?? 0) + cost)
        }
        for (const sum of admitted.values()) assert.ok(sum <= trace.policy.limit, `${sum} > ${trace.policy.limit}`)
      }),
      { numRuns: 300 },
    )
  })

  itForgetsAfterTtl(fixedWindow)
})

describe('fixed-window: the Lua twin', () => {
  const redis = useRedis()

  itMatchesLuaTwin(redis, fixedWindow)
})
