// Proofs for concurrency leases: examples, a reference that tracks every lease with explicit
// releases and expiry, exact retryAfterMs, peeks, ttl, and the Lua twin on a real Redis.

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import { concurrency } from '../../../src/core/algorithms/concurrency.js'
import type { Policy } from '../../../src/core/policy.js'
import type { State, StepResult } from '../../../src/core/algorithms/types.js'
import {
  START,
  arbTrace,
  assertPeekKeepsState,
  assertRetryAfterExact,
  assertTtlForgets,
  assertWellFormed,
  policyFor,
  replay,
  useRedis,
  itMatchesLuaTwin,
} from './support.js'
import { luaStep } from '../../support/lua-step.js'

// Traces of realistic length (fast-check's default size keeps arrays to a handful of steps).
fc.configureGlobal({ baseSize: 'medium' })

/** Steps [at, cost] pairs (absolute offsets from START), keeping state only when allowed. */
function run(policy: Policy, steps: [number, number][], state?: State): StepResult[] {
  return steps.map(([at, cost]) => {
    const result = concurrency.step(state, START + at, cost, policy)
    if (result.allowed) state = result.state
    return result
  })
}

describe('concurrency: examples', () => {
  const policy = policyFor('concurrency', 2, 30_000) // 2 in flight, a lease lives 30 s

  it('admits limit leases, then denies until one is released or expires', () => {
    const [a, b, c, released, d] = run(policy, [
      [0, 1],
      [1_000, 1],
      [2_000, 1],
      [3_000, -1],
      [3_000, 1],
    ])
    assert.deepEqual([a.allowed, b.allowed, c.allowed, released.allowed, d.allowed], [true, true, false, true, true])
    assert.deepEqual([a.remaining, b.remaining, c.remaining, released.remaining, d.remaining], [1, 0, 0, 1, 0])
    assert.equal(c.retryAfterMs, 28_000, 'until the earliest lease expires')
    assert.equal(b.resetMs, 30_000)
    const expired = run(policy, [
      [0, 1],
      [1_000, 1],
      [30_000, 1],
      [30_999, 1],
      [31_000, 1],
    ])
    assert.deepEqual(
      expired.map((r) => r.allowed),
      [true, true, true, false, true],
    )
  })

  it('releases the earliest-expiring lease, so the rest can only look longer-lived', () => {
    const [, second, released] = run(policy, [
      [0, 1],
      [10_000, 1],
      [20_000, -1],
    ])
    assert.deepEqual(second.state, [START + 30_000, 1, START + 40_000, 1])
    assert.deepEqual(released.state, [START + 40_000, 1])
    assert.equal(released.resetMs, 20_000)
  })

  it('takes several leases for a cost, and waits for as many expiries as it needs', () => {
    const wide = policyFor('concurrency', 3, 10_000)
    const [, , c] = run(wide, [
      [0, 1],
      [1_000, 1],
      [2_000, 3],
    ])
    assert.equal(c.allowed, false)
    assert.equal(c.retryAfterMs, 9_000, 'both leases must go: the later expires at 11 s')
    const [, , d] = run(wide, [
      [0, 1],
      [1_000, 1],
      [2_000, 2],
    ])
    assert.equal(d.retryAfterMs, 8_000, 'one lease must go: the earlier expires at 10 s')
    const [, , e] = run(wide, [
      [0, 1],
      [1_000, 1],
      [2_000, 4],
    ])
    assert.equal(e.allowed, false)
    assert.equal(e.retryAfterMs, e.resetMs, 'a cost above limit waits for everything to expire')
  })

  it('keeps leases taken in the same millisecond in one pair, whatever their cost', () => {
    const wide = policyFor('concurrency', 1_000_000, 10_000)
    const [, b, c] = run(wide, [
      [0, 400_000],
      [0, 1],
      [5, 2],
    ])
    assert.deepEqual(b.state, [START + 10_000, 400_001])
    assert.deepEqual(c.state, [START + 10_000, 400_001, START + 10_005, 2])
    assert.equal(c.remaining, 1_000_000 - 400_003)
    const released = concurrency.step(c.state, START + 6, -400_002, wide)
    assert.deepEqual(released.state, [START + 10_005, 1])
  })

  it('never releases below empty, and peeks at the limit pass while peeks beyond it do not', () => {
    const [, , refund] = run(policy, [
      [0, 1],
      [0, 1],
      [0, -5],
    ])
    assert.deepEqual([refund.remaining, refund.state], [2, []])
    const [, full] = run(policy, [
      [0, 1],
      [0, 1],
    ])
    assert.equal(concurrency.step(full.state, START, 0, policy).allowed, true)
    const narrower = policyFor('concurrency', 1, 30_000)
    const peek = concurrency.step(full.state, START + 5, 0, narrower)
    assert.equal(peek.allowed, false)
    assert.equal(peek.retryAfterMs, 29_995)
  })

  it('keeps the state sorted when the clock steps back', () => {
    const [a, b] = run(policy, [
      [10_000, 1],
      [0, 1],
    ])
    assert.deepEqual(b.state, [START + 30_000, 1, START + 40_000, 1])
    assert.ok(a.allowed && b.allowed)
  })
})

/** A step of a lease trace: acquire `cost` leases, release the `pick`-th live lease group, or peek. */
type LeaseStep =
  | { gap: number; kind: 'acquire'; cost: number }
  | { gap: number; kind: 'release'; pick: number }
  | { gap: number; kind: 'peek' }

function arbLeaseTrace(): fc.Arbitrary<{ policy: Policy; steps: LeaseStep[] }> {
  return fc
    .record({
      limit: fc.integer({ min: 1, max: 8 }),
      periodMs: fc.oneof(fc.integer({ min: 1, max: 50 }), fc.integer({ min: 51, max: 60_000 })),
    })
    .chain(({ limit, periodMs }) => {
      const gap = fc.oneof(
        fc.constant(0),
        fc.integer({ min: 1, max: Math.max(1, Math.ceil(periodMs / 4)) }),
        fc.integer({ min: 0, max: 2 * periodMs }),
      )
      const step = fc.oneof(
        { weight: 5, arbitrary: fc.record({ gap, kind: fc.constant('acquire' as const), cost: fc.integer({ min: 1, max: limit + 1 }) }) },
        { weight: 3, arbitrary: fc.record({ gap, kind: fc.constant('release' as const), pick: fc.nat() }) },
        { weight: 1, arbitrary: fc.record({ gap, kind: fc.constant('peek' as const) }) },
      )
      return fc.record({
        policy: fc.constant(policyFor('concurrency', limit, periodMs)),
        steps: fc.array(step, { minLength: 1, maxLength: 40 }),
      })
    })
}

/**
 * Drives the algorithm with a lease trace while a reference tracks every admitted lease group
 * (cost, expiry) individually. Releases name a live group, as the limiter releases a real lease
 * it holds; `earliest` releases the earliest-expiring group, otherwise the picked one.
 * Returns after checking the invariant: never more than `limit` leases truly in flight.
 */
function driveLeases(
  policy: Policy,
  steps: LeaseStep[],
  earliest: boolean,
  check: (truth: number, result: StepResult, step: LeaseStep, now: number, groups: { cost: number; expiry: number }[]) => void,
): void {
  let state: State | undefined
  let now = START
  let groups: { cost: number; expiry: number }[] = []
  for (const step of steps) {
    now += step.gap
    groups = groups.filter((g) => g.expiry > now)
    let cost = 0
    let released = -1
    if (step.kind === 'acquire') cost = step.cost
    if (step.kind === 'release') {
      if (groups.length === 0) continue
      released = earliest ? 0 : step.pick % groups.length
      cost = -groups[released].cost
    }
    const truthBefore = groups.reduce((n, g) => n + g.cost, 0)
    const result = concurrency.step(state, now, cost, policy)
    if (result.allowed) {
      state = result.state
      if (cost > 0) groups.push({ cost, expiry: now + policy.periodMs })
      if (released >= 0) groups.splice(released, 1)
    }
    const truth = groups.reduce((n, g) => n + g.cost, 0)
    assert.ok(truth <= policy.limit, `${truth} leases in flight, limit ${policy.limit}`)
    // Conservative: the state never holds fewer leases than are truly in flight.
    assert.ok(policy.limit - concurrency.step(state, now, 0, policy).remaining >= truth)
    check(truthBefore, result, step, now, groups)
  }
}

describe('concurrency: properties', () => {
  it('never has more than limit leases in flight, whichever lease is released', () => {
    fc.assert(
      fc.property(arbLeaseTrace(), ({ policy, steps }) => {
        driveLeases(policy, steps, false, (truthBefore, result, step) => {
          assertWellFormed(result)
          if (step.kind === 'acquire' && result.allowed) assert.ok(truthBefore + step.cost <= policy.limit)
        })
      }),
      { numRuns: 300 },
    )
  })

  it('decides exactly as the per-lease reference when the earliest lease is released', () => {
    fc.assert(
      fc.property(arbLeaseTrace(), ({ policy, steps }) => {
        driveLeases(policy, steps, true, (truthBefore, result, step, now, groups) => {
          const inFlight = groups.reduce((n, g) => n + g.cost, 0)
          assert.equal(result.remaining, policy.limit - inFlight)
          const expiries = groups.flatMap((g) => Array<number>(g.cost).fill(g.expiry)).sort((a, b) => a - b)
          assert.equal(result.resetMs, expiries.length > 0 ? expiries[expiries.length - 1] - now : 0)
          if (step.kind === 'acquire') {
            assert.equal(result.allowed, truthBefore + step.cost <= policy.limit)
            if (!result.allowed && step.cost <= policy.limit) {
              assert.equal(result.retryAfterMs, expiries[truthBefore + step.cost - policy.limit - 1] - now)
            }
          }
        })
      }),
      { numRuns: 300 },
    )
  })

  it('gives exact retryAfterMs, keeps state on peeks, and forgets after ttlMs', () => {
    fc.assert(
      fc.property(arbTrace('concurrency'), (trace) => {
        const steps = replay(concurrency, trace)
        for (const { result } of steps) assertWellFormed(result)
        assertRetryAfterExact(concurrency, steps, trace.policy, trace.policy.limit)
        assertPeekKeepsState(concurrency, steps, trace.policy)
        assertTtlForgets(concurrency, steps, trace.policy)
      }),
      { numRuns: 150 },
    )
  })
})

describe('concurrency: the Lua twin', () => {
  const redis = useRedis()
  itMatchesLuaTwin(redis, concurrency, { maxLimit: 20 })

  it('agrees when the clock steps back and on an empty state', async () => {
    const policy = policyFor('concurrency', 3, 10_000)
    let state: State | undefined = []
    for (const [at, cost] of [
      [5_000, 1],
      [0, 1],
      [2_000, 0],
      [1_000, -1],
      [0, 2],
      [20_000, 0],
      [20_000, -1],
    ]) {
      const ts = concurrency.step(state, START + at, cost, policy)
      assert.deepEqual(await luaStep(redis(), 'concurrency', state, START + at, cost, policy), ts)
      if (ts.allowed) state = ts.state
    }
  })
})
