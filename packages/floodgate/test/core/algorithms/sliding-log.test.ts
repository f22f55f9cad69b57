// Proofs for the sliding-log algorithm: examples, a never-pruned reference log, the rolling-window
// invariant over every window, ttl, and its Lua twin.

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import { slidingLog } from '../../../src/core/algorithms/sliding-log.js'
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

const three = policyFor('sliding-log', 3, 1_000)

/** Steps through (offset from START, cost) pairs from `state`, committing allowed states. */
function run(steps: [number, number][], state?: State) {
  return steps.map(([at, cost]) => {
    const result = slidingLog.step(state, START + at, cost, three)
    if (result.allowed) state = result.state
    return result
  })
}

describe('sliding-log: examples', () => {
  it('admits limit per rolling window and waits for the oldest entry to leave', () => {
    const results = run([
      [0, 1],
      [100, 1],
      [200, 1],
      [300, 1],
      [999, 1],
      [1_000, 1],
      [1_050, 1],
    ])
    assert.deepEqual(
      results.map((r) => r.allowed),
      [true, true, true, false, false, true, false],
    )
    assert.equal(results[3].retryAfterMs, 700)
    assert.equal(results[4].retryAfterMs, 1)
    // The entry at 100 leaves at 1100.
    assert.equal(results[6].retryAfterMs, 50)
    assert.deepEqual(results[5].state, [START + 100, 1, START + 200, 1, START + 1_000, 1])
  })

  it('waits for as many old entries as the cost needs', () => {
    const [denied] = run([[300, 2]], [START, 1, START + 100, 1, START + 200, 1])
    // Two entries must leave: the second (logged at 100) leaves at 1100.
    assert.equal(denied.retryAfterMs, 800)
  })

  it('merges requests of the same millisecond into one entry', () => {
    const results = run([
      [5, 1],
      [5, 1],
    ])
    assert.deepEqual(results[1].state, [START + 5, 2])
  })

  it('denies a cost above the limit, waiting until the newest entry leaves', () => {
    const [result] = run([[300, 4]], [START, 1, START + 100, 1])
    assert.equal(result.allowed, false)
    assert.equal(result.resetMs, 800)
    assert.equal(result.retryAfterMs, 800)
  })

  it('refunds from the newest entries, never below an empty log', () => {
    const log = [START, 1, START + 100, 2]
    assert.deepEqual(run([[150, -1]], log)[0].state, [START, 1, START + 100, 1])
    assert.deepEqual(run([[150, -2]], log)[0].state, [START, 1])
    assert.deepEqual(run([[150, -9]], log)[0], { allowed: true, remaining: 3, resetMs: 0, retryAfterMs: 0, delayMs: 0, state: [] })
  })

  it('peeks without charging; a peek is denied only beyond the limit', () => {
    const [atLimit] = run([[150, 0]], [START, 1, START + 100, 2])
    assert.deepEqual([atLimit.allowed, atLimit.remaining], [true, 0])
    const [beyond] = run([[150, 0]], [START, 2, START + 100, 2])
    assert.equal(beyond.allowed, false)
    assert.equal(beyond.retryAfterMs, 850)
  })

  it('forgets the log when its newest entry leaves the window', () => {
    assert.equal(slidingLog.ttlMs([START, 1, START + 100, 2], START + 150, three), 950)
    assert.equal(slidingLog.ttlMs([], START, three), 1)
  })

  it('logs at the newest time seen when the clock steps back', () => {
    const [result] = run([[50, 1]], [START + 100, 1])
    assert.deepEqual(result.state, [START + 100, 2])
  })
})

interface Entry {
  t: number
  cost: number
}

/** Cost in the rolling window that ends at `now`: entries with t > now - periodMs. */
function usedAt(log: readonly Entry[], now: number, periodMs: number): number {
  let used = 0
  for (const { t, cost } of log) if (t > now - periodMs && t <= now) used += cost
  return used
}

/** The earliest time ≥ now at which the window holds at most `bound`: some entry's leaving time, or now. */
function earliest(log: readonly Entry[], now: number, periodMs: number, bound: number): number {
  const candidates = [now, ...log.map(({ t }) => t + periodMs).filter((t) => t > now)].sort((a, b) => a - b)
  const found = candidates.find((t) => usedAt(log, t, periodMs) <= bound)
  assert.ok(found !== undefined, 'an empty window holds nothing, so some candidate fits')
  return found
}

/** A log that is never pruned; refunds take from the newest entries still in the window. */
function referenceDecisions(policy: Policy, steps: { now: number; cost: number }[]) {
  const { limit, periodMs } = policy
  const log: Entry[] = []
  return steps.map(({ now, cost }) => {
    const used = usedAt(log, now, periodMs)
    const allowed = cost > 0 ? used + cost <= limit : cost === 0 ? used <= limit : true
    let retryAfterMs = 0
    if (!allowed && cost <= limit) retryAfterMs = earliest(log, now, periodMs, limit - cost) - now
    if (allowed && cost > 0) log.push({ t: now, cost })
    for (let i = log.length - 1, units = -cost; i >= 0 && units > 0 && log[i].t > now - periodMs; i--) {
      const taken = Math.min(units, log[i].cost)
      log[i].cost -= taken
      units -= taken
    }
    const resetMs = earliest(log, now, periodMs, 0) - now
    if (!allowed && cost > limit) retryAfterMs = resetMs
    return { allowed, remaining: Math.max(0, limit - usedAt(log, now, periodMs)), resetMs, retryAfterMs }
  })
}

describe('sliding-log: properties', () => {
  it('decides as a never-pruned reference log does, with the same exact waits', () => {
    fc.assert(
      fc.property(arbTrace('sliding-log'), (trace) => {
        const steps = replay(slidingLog, trace)
        const expected = referenceDecisions(trace.policy, steps)
        steps.forEach(({ result }, i) => {
          assertWellFormed(result)
          const { allowed, remaining, resetMs, retryAfterMs } = result
          assert.deepEqual({ allowed, remaining, resetMs, retryAfterMs }, expected[i], `step ${i}`)
          assert.ok(result.state.length <= 2 * trace.policy.limit, `log of ${result.state.length / 2} entries`)
        })
        assertRetryAfterExact(slidingLog, steps, trace.policy, trace.policy.limit)
        assertPeekKeepsState(slidingLog, steps, trace.policy)
      }),
      { numRuns: 300 },
    )
  })

  it('never admits more than limit in any rolling window of periodMs', () => {
    fc.assert(
      fc.property(arbTrace('sliding-log', { refunds: false }), (trace) => {
        const admitted = replay(slidingLog, trace).filter(({ cost, result }) => cost > 0 && result.allowed)
        for (const { now: end } of admitted) {
          const inWindow = admitted.filter(({ now }) => now > end - trace.policy.periodMs && now <= end)
          const sum = inWindow.reduce((total, { cost }) => total + cost, 0)
          assert.ok(sum <= trace.policy.limit, `${sum} admitted in the window ending at ${end}`)
        }
      }),
      { numRuns: 300 },
    )
  })

  itForgetsAfterTtl(slidingLog)
})

describe('sliding-log: the Lua twin', () => {
  const redis = useRedis()

  itMatchesLuaTwin(redis, slidingLog)
})
