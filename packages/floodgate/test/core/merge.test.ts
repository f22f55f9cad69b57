// The merge primitive (core/merge.ts, twin merge.lua): a forced charge that equals an ordinary charge
// whenever the limit would have allowed it, commutes, debts are read as denials, and the Lua twin
// computes the same numbers.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import { ALGORITHM_BY_NAME } from '../../src/core/algorithms/index.js'
import { MERGE_BY_NAME, mergeKey, mergeRefusal } from '../../src/core/merge.js'
import { createPolicy, type AlgorithmName } from '../../src/core/policy.js'
import type { State } from '../../src/core/algorithms/types.js'
import { arbTrace, replay, useRedis, START, policyFor } from './algorithms/support.js'
import { luaMerge } from '../support/lua-merge.js'

const MERGEABLE = Object.keys(MERGE_BY_NAME) as AlgorithmName[]

/** Random states reached by real traces, a time after them and units to merge. */
function arbMergeCase(algorithm: AlgorithmName) {
  return arbTrace(algorithm, { clockStepsBack: true }).chain((trace) =>
    fc.record({
      trace: fc.constant(trace),
      cut: fc.nat({ max: trace.steps.length }),
      gap: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 2 * trace.policy.periodMs + 2 }), fc.integer({ min: -50, max: -1 })),
      units: fc.oneof(fc.integer({ min: 1, max: 3 * Math.max(trace.policy.limit, trace.policy.burst) }), fc.integer({ min: -20, max: 0 })),
      more: fc.integer({ min: 1, max: 20 }),
    }),
  )
}

function stateAt(algorithm: AlgorithmName, trace: Parameters<typeof replay>[1], cut: number): { state: State | undefined; now: number } {
  const steps = replay(ALGORITHM_BY_NAME[algorithm], { ...trace, steps: trace.steps.slice(0, cut) })
  let state: State | undefined
  for (const step of steps) if (step.result.allowed) state = step.result.state
  return { state, now: steps.length > 0 ? steps[steps.length - 1].now : trace.start }
}

describe('merge', () => {
  for (const algorithm of MERGEABLE) {
    const step = ALGORITHM_BY_NAME[algorithm]
    const merge = MERGE_BY_NAME[algorithm]!

    it(`${algorithm}: a merge is the step's charge or refund whenever the step would admit it`, () => {
      fc.assert(
        fc.property(arbMergeCase(algorithm), ({ trace, cut, gap, units }) => {
          const { state, now } = stateAt(algorithm, trace, cut)
          const at = now + gap
          if (units === 0) return
          const stepped = step.step(state, at, units, trace.policy)
          if (!stepped.allowed) return
          assert.deepEqual(merge(state, at, units, trace.policy), stepped.state)
        }),
        { numRuns: 300 },
      )
    })

    it(`${algorithm}: charges commute, and a state in debt denies what a fresh key would admit`, () => {
      fc.assert(
        fc.property(arbMergeCase(algorithm), ({ trace, cut, gap, units, more }) => {
          const { state, now } = stateAt(algorithm, trace, cut)
          const at = now + Math.max(0, gap)
          const a = Math.abs(units) + 1
          const ab = merge(merge(state, at, a, trace.policy), at, more, trace.policy)
          const ba = merge(merge(state, at, more, trace.policy), at, a, trace.policy)
          assert.deepEqual(ab, ba)
          // Charged past what a fresh key may spend at once: nothing passes now, and the result is well formed.
          const capacity = step.step(undefined, at, 0, trace.policy).remaining
          const owed = merge(state, at, capacity + more, trace.policy)
          const after = step.step(owed, at, 1, trace.policy)
          assert.equal(after.allowed, false)
          assert.equal(after.remaining, 0)
          assert.ok(after.retryAfterMs > 0 && after.resetMs >= after.retryAfterMs)
          assert.ok(step.ttlMs(owed, at, trace.policy) >= 1)
        }),
        { numRuns: 300 },
      )
    })
  }

  it('refuses what has no sound merge, with the reason', () => {
    assert.match(mergeRefusal('concurrency', false)!, /leases in flight/)
    assert.match(mergeRefusal('sliding-log', false)!, /every timestamp; use sliding-window/)
    assert.match(mergeRefusal('leaky-bucket', true)!, /same turn twice/)
    assert.equal(mergeRefusal('leaky-bucket', false), undefined)
    for (const algorithm of MERGEABLE) assert.equal(mergeRefusal(algorithm, false), undefined)
    assert.throws(() => createPolicy({ algorithm: 'sliding-log', limit: 5, period: '1s', sync: 'write-back' }), /every timestamp/)
  })

  it('mergeKey leaves a record as it is for zero units, keeps a running block, and charges the others', () => {
    const window = policyFor('fixed-window', 10, 1000)
    const bucket = policyFor('token-bucket', 10, 1000)
    const records = [{ blockedUntil: START + 500, state: [START, 4] }, undefined]
    const merged = mergeKey(records, START + 10, [0, 3], [window, bucket])
    assert.deepEqual(merged.records[0], { blockedUntil: START + 500, state: [START, 4] })
    assert.deepEqual(merged.records[1], { blockedUntil: 0, state: [7 * 1000, START + 10] })
    assert.deepEqual(merged.ttlMs, [990, 300])
    assert.deepEqual(mergeKey([undefined], START, [0], [window]).records, [{ blockedUntil: 0, state: undefined }])
  })

  describe('Lua twin (merge.lua) on a real Redis', () => {
    const redis = useRedis()
    for (const algorithm of MERGEABLE) {
      it(`${algorithm}: merge.lua gives the same state, number for number`, async () => {
        await fc.assert(
          fc.asyncProperty(arbMergeCase(algorithm), async ({ trace, cut, gap, units }) => {
            const { state, now } = stateAt(algorithm, trace, cut)
            const at = now + gap
            const expected = MERGE_BY_NAME[algorithm]!(state, at, units, trace.policy)
            assert.deepEqual(await luaMerge(redis(), state, at, units, trace.policy), expected)
          }),
          { numRuns: 150 },
        )
      })
    }
  })
})
