// Proofs for the leaky bucket, policing and shaping: examples, a per-request FIFO reference in
// exact integers, the rate and queue invariants, exact retryAfterMs, peeks, ttl, and the Lua twin.

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import { leakyBucket } from '../../../src/core/algorithms/leaky-bucket.js'
import { gcra } from '../../../src/core/algorithms/gcra.js'
import { createPolicy, type Policy } from '../../../src/core/policy.js'
import type { StepResult } from '../../../src/core/algorithms/types.js'
import {
  START,
  arbTrace,
  assertLuaTwin,
  assertPeekKeepsState,
  assertRetryAfterExact,
  assertTtlForgets,
  assertWellFormed,
  policyFor,
  replay,
  useRedis,
  type Trace,
  type TraceOptions,
  assertRateBound,
} from './support.js'
import { luaStep } from '../../support/lua-step.js'

// Traces of realistic length (fast-check's default size keeps arrays to a handful of steps).
fc.configureGlobal({ baseSize: 'medium' })

function shapingPolicy(limit: number, periodMs: number, burst?: number): Policy {
  return createPolicy({ algorithm: 'leaky-bucket', limit, period: periodMs, shaping: true, ...(burst === undefined ? {} : { burst }) })
}

/** Random shaping traces: the support traces with the policy switched to shaping. */
function arbShapingTrace(options?: TraceOptions): fc.Arbitrary<Trace> {
  return arbTrace('leaky-bucket', options).map((trace) => ({
    ...trace,
    policy: shapingPolicy(trace.policy.limit, trace.policy.periodMs, trace.policy.burst),
  }))
}

/** Steps a trace of [gap, cost] pairs from no state, keeping state only when allowed. */
function run(policy: Policy, steps: [number, number][], start = START): StepResult[] {
  let state: number[] | undefined
  let now = start
  return steps.map(([gap, cost]) => {
    now += gap
    const result = leakyBucket.step(state, now, cost, policy)
    if (result.allowed) state = result.state
    return result
  })
}

/** Well-formed, with the shaping rule for delays: only admitted charges wait. */
function assertShapedWellFormed(result: StepResult, cost: number): void {
  assertWellFormed({ ...result, delayMs: 0 })
  assert.ok(Number.isInteger(result.delayMs) && result.delayMs >= 0 && !Object.is(result.delayMs, -0))
  if (!result.allowed || cost <= 0) assert.equal(result.delayMs, 0)
}

describe('leaky-bucket policing: examples', () => {
  it('admits up to burst at once, then leaks limit per period', () => {
    const policy = policyFor('leaky-bucket', 2, 1_000, 4)
    const results = run(policy, [
      [0, 1],
      [0, 1],
      [0, 1],
      [0, 1],
      [0, 1],
      [499, 1],
      [1, 1],
      [0, 1],
    ])
    assert.deepEqual(
      results.map((r) => r.allowed),
      [true, true, true, true, false, false, true, false],
    )
    assert.deepEqual(
      results.map((r) => r.remaining),
      [3, 2, 1, 0, 0, 0, 0, 0],
    )
    assert.equal(results[4].retryAfterMs, 500)
    assert.equal(results[5].retryAfterMs, 1)
    assert.equal(results[6].resetMs, 2_000)
    assert.ok(results.every((r) => r.delayMs === 0))
  })

  it('leaks in fractions of a unit exactly (limit 3 per second)', () => {
    const policy = policyFor('leaky-bucket', 3, 1_000, 1)
    const [, denied, early, onTime] = run(policy, [
      [0, 1],
      [0, 1],
      [333, 1],
      [1, 1],
    ])
    assert.equal(denied.retryAfterMs, 334)
    assert.equal(early.allowed, false)
    assert.equal(onTime.allowed, true)
  })

  it('denies a cost above burst with the time until empty, and refunds down to empty only', () => {
    const policy = policyFor('leaky-bucket', 10, 1_000)
    const [a, b] = run(policy, [
      [0, 4],
      [0, 11],
    ])
    assert.equal(b.allowed, false)
    assert.equal(b.retryAfterMs, 400)
    assert.equal(b.retryAfterMs, b.resetMs)
    const refund = leakyBucket.step(a.state, START, -100, policy)
    assert.equal(refund.remaining, 10)
    assert.equal(refund.resetMs, 0)
  })

  it('leaks nothing when the clock steps back, and keeps the later time', () => {
    const policy = policyFor('leaky-bucket', 1, 1_000, 2)
    const [, second] = run(policy, [
      [0, 1],
      [1_000, 1],
    ]) // level 1 unit at START + 1000
    const back = leakyBucket.step(second.state, START, 0, policy)
    assert.deepEqual(back.state, second.state)
    assert.equal(back.remaining, 1)
    assert.equal(back.resetMs, 2_000)
  })

  it('reads a level stored under another period as the same number of units', () => {
    const state = run(policyFor('leaky-bucket', 10, 1_000), [[0, 4]])[0].state
    const reloaded = policyFor('leaky-bucket', 10, 60_000)
    assert.equal(leakyBucket.step(state, START, 0, reloaded).remaining, 6)
  })
})

describe('leaky-bucket shaping: examples', () => {
  it('spaces admitted requests one interval apart and rejects when the queue is full', () => {
    const policy = shapingPolicy(5, 1_000, 3) // interval 200 ms, queue of 3
    const results = run(policy, [
      [0, 1],
      [0, 1],
      [0, 1],
      [0, 1],
      [200, 1],
    ])
    assert.deepEqual(
      results.map((r) => r.allowed),
      [true, true, true, false, true],
    )
    assert.deepEqual(
      results.map((r) => r.delayMs),
      [0, 200, 400, 0, 400],
    )
    assert.equal(results[3].retryAfterMs, 200)
    assert.equal(results[2].remaining, 0)
    assert.equal(results[2].resetMs, 600)
  })

  it('rounds each start up to the millisecond without drifting (interval 333.33… ms)', () => {
    const policy = shapingPolicy(3, 1_000, 10)
    const results = run(policy, [
      [0, 1],
      [0, 1],
      [0, 1],
      [0, 1],
      [0, 1],
      [0, 1],
      [0, 1],
    ])
    assert.deepEqual(
      results.map((r) => r.delayMs),
      [0, 334, 667, 1_000, 1_334, 1_667, 2_000],
    )
  })

  it('lets a cost of several units hold the queue for that many intervals', () => {
    const policy = shapingPolicy(10, 1_000, 10)
    const [a, b, c] = run(policy, [
      [0, 5],
      [0, 3],
      [50, 1],
    ])
    assert.deepEqual([a.delayMs, b.delayMs, c.delayMs], [0, 500, 750])
  })

  it('does not delay peeks and refunds, and a refund shortens the queue', () => {
    const policy = shapingPolicy(10, 1_000, 10)
    const [full] = run(policy, [[0, 10]])
    const peek = leakyBucket.step(full.state, START, 0, policy)
    assert.deepEqual([peek.allowed, peek.delayMs, peek.remaining], [true, 0, 0])
    const refund = leakyBucket.step(full.state, START, -4, policy)
    assert.deepEqual([refund.allowed, refund.delayMs, refund.remaining], [true, 0, 4])
    assert.equal(leakyBucket.step(refund.state, START, 1, policy).delayMs, 600)
  })

  it('reads a tail stored under another limit as the same time, rounded up to the millisecond', () => {
    const [, second] = run(shapingPolicy(3, 1_000), [
      [0, 1],
      [0, 1],
    ]) // tail at 666.67 ms
    const reloaded = shapingPolicy(6, 1_000)
    assert.equal(leakyBucket.ttlMs(second.state, START, reloaded), 667)
    assert.equal(leakyBucket.step(second.state, START, 1, reloaded).delayMs, 667)
  })
})

/**
 * The reference: every admitted request kept with its exact schedule (times in ticks of 1/limit
 * ms, BigInt), served first come first served at one unit per interval. The queue's content at a
 * time is what the requests still have to be served; refunds take work off the newest requests.
 */
class QueueReference {
  private readonly requests: { start: bigint; end: bigint }[] = []
  private readonly L: bigint
  private readonly P: bigint
  private readonly capacity: bigint
  constructor(private readonly policy: Policy) {
    this.L = BigInt(policy.limit)
    this.P = BigInt(policy.periodMs)
    this.capacity = BigInt(policy.burst) * this.P
  }

  /** Ticks of work not yet served at `t` (ticks). */
  queued(t: bigint): bigint {
    let total = 0n
    for (const { start, end } of this.requests) if (end > t) total += end - (start > t ? start : t)
    return total
  }

  step(now: number, cost: number) {
    const t = BigInt(now) * this.L
    const queued = this.queued(t)
    const need = BigInt(cost) * this.P
    let allowed = true
    let delay = 0n
    if (cost > 0) {
      allowed = queued + need <= this.capacity
      if (allowed) {
        const tail = this.requests.length === 0 ? t : this.requests[this.requests.length - 1].end
        const start = tail > t ? tail : t
        this.requests.push({ start, end: start + need })
        delay = ceilDiv(start - t, this.L)
      }
    } else if (cost < 0) {
      let refund = -need
      while (refund > 0n && this.requests.length > 0) {
        const last = this.requests[this.requests.length - 1]
        const open = last.end - (last.start > t ? last.start : t)
        if (open <= 0n) break
        const taken = open < refund ? open : refund
        last.end -= taken
        refund -= taken
        if (last.end <= last.start) this.requests.pop()
      }
    } else {
      allowed = queued <= this.capacity
    }
    const after = this.queued(t)
    const resetMs = ceilDiv(after, this.L)
    let retryAfterMs = 0n
    if (!allowed) retryAfterMs = cost > this.policy.burst ? resetMs : ceilDiv(queued + need - this.capacity, this.L)
    return {
      allowed,
      remaining: Number((this.capacity - after) / this.P),
      resetMs: Number(resetMs),
      retryAfterMs: Number(retryAfterMs),
      delayMs: this.policy.shaping ? Number(delay) : 0,
      queuedTicks: after,
    }
  }
}

function ceilDiv(a: bigint, b: bigint): bigint {
  return a <= 0n ? 0n : (a + b - 1n) / b
}

function assertMatchesReference(trace: Trace): void {
  const reference = new QueueReference(trace.policy)
  for (const { now, cost, result } of replay(leakyBucket, trace)) {
    if (trace.policy.shaping) assertShapedWellFormed(result, cost)
    else assertWellFormed(result)
    const { queuedTicks, ...expected } = reference.step(now, cost)
    assert.ok(queuedTicks <= BigInt(trace.policy.burst * trace.policy.periodMs), 'the queue holds at most burst units')
    const { allowed, remaining, resetMs, retryAfterMs, delayMs } = result
    assert.deepEqual({ allowed, remaining, resetMs, retryAfterMs, delayMs }, expected, `at ${now - trace.start} cost ${cost}`)
  }
}

describe('leaky-bucket: properties', () => {
  it('policing decides exactly as the per-request queue reference', () => {
    fc.assert(fc.property(arbTrace('leaky-bucket', { maxLimit: 200 }), assertMatchesReference), { numRuns: 250 })
  })

  it('shaping decides and delays exactly as the per-request queue reference', () => {
    fc.assert(fc.property(arbShapingTrace({ maxLimit: 200 }), assertMatchesReference), { numRuns: 250 })
  })

  it('admits the same requests policing, shaping and as GCRA (one rate, three views)', () => {
    fc.assert(
      fc.property(arbTrace('leaky-bucket', { maxLimit: 200 }), (trace) => {
        const { limit, periodMs, burst } = trace.policy
        const policing = replay(leakyBucket, trace).map((s) => s.result.allowed)
        const shaping = replay(leakyBucket, { ...trace, policy: shapingPolicy(limit, periodMs, burst) }).map((s) => s.result.allowed)
        const asGcra = replay(gcra, { ...trace, policy: policyFor('gcra', limit, periodMs, burst) }).map((s) => s.result.allowed)
        assert.deepEqual(policing, asGcra)
        assert.deepEqual(shaping, asGcra)
      }),
      { numRuns: 200 },
    )
  })

  it('policing never admits more than burst + (b − a) / interval in any interval [a, b]', () => {
    fc.assert(
      fc.property(arbTrace('leaky-bucket', { refunds: false }), (trace) => assertRateBound(replay(leakyBucket, trace), trace.policy)),
      { numRuns: 250 },
    )
  })

  it('shaping releases requests in order, spaced by the drain rate, never early', () => {
    fc.assert(
      fc.property(arbShapingTrace({ refunds: false }), (trace) => {
        const { limit, periodMs } = trace.policy
        const admitted = replay(leakyBucket, trace).filter((s) => s.result.allowed && s.cost > 0)
        const releases = admitted.map((s) => s.now + s.result.delayMs)
        for (let i = 0; i < admitted.length; i++) {
          let units = 0
          for (let j = i + 1; j < admitted.length; j++) {
            units += admitted[j - 1].cost
            // Release times are whole ms, so each may be up to 1 ms late, never early:
            // releases[j] - releases[i] > units × interval - 1, multiplied out by limit.
            assert.ok(releases[j] >= releases[j - 1], 'in order')
            assert.ok((releases[j] - releases[i]) * limit > units * periodMs - limit, `spacing ${i}..${j}`)
          }
        }
      }),
      { numRuns: 250 },
    )
  })

  for (const [form, arb] of [
    ['policing', arbTrace('leaky-bucket', { maxLimit: 100 })],
    ['shaping', arbShapingTrace({ maxLimit: 100 })],
  ] as const) {
    it(`${form}: exact retryAfterMs, peeks keep state, state forgotten after ttlMs`, () => {
      fc.assert(
        fc.property(arb, (trace) => {
          const steps = replay(leakyBucket, trace)
          assertRetryAfterExact(leakyBucket, steps, trace.policy, trace.policy.burst)
          assertPeekKeepsState(leakyBucket, steps, trace.policy)
          assertTtlForgets(leakyBucket, steps, trace.policy)
        }),
        { numRuns: 120 },
      )
    })
  }
})

describe('leaky-bucket: the Lua twin', () => {
  const redis = useRedis()
  it('agrees when the clock steps back', async () => {
    for (const policy of [policyFor('leaky-bucket', 3, 1_000, 2), shapingPolicy(3, 1_000, 2)]) {
      let state: number[] | undefined
      for (const [now, cost] of [
        [START, 1],
        [START + 1_000, 1],
        [START + 400, 0],
        [START + 400, 1],
        [START, -1],
        [START + 2_000, 1],
      ]) {
        const ts = leakyBucket.step(state, now, cost, policy)
        assert.deepEqual(await luaStep(redis(), 'leaky-bucket', state, now, cost, policy), ts)
        if (ts.allowed) state = ts.state
      }
    }
  })

  it('policing returns exactly what TypeScript returns, step by step, and the same ttl', async () => {
    await fc.assert(
      fc.asyncProperty(arbTrace('leaky-bucket', { maxLimit: 1_000, clockStepsBack: true }), (trace) =>
        assertLuaTwin(redis(), leakyBucket, trace),
      ),
      { numRuns: 120 },
    )
  })

  it('shaping returns exactly what TypeScript returns, step by step, and the same ttl', async () => {
    await fc.assert(
      fc.asyncProperty(arbShapingTrace({ maxLimit: 1_000, clockStepsBack: true }), (trace) => assertLuaTwin(redis(), leakyBucket, trace)),
      { numRuns: 120 },
    )
  })
})
