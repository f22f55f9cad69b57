// Proofs for the token-bucket algorithm: examples, a reference bucket in exact rationals, the
// burst + rate × time bound over every interval, ttl, and its Lua twin.

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import { tokenBucket } from '../../../src/core/algorithms/token-bucket.js'
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

const tenPerSecond = policyFor('token-bucket', 10, 1_000)
const burstThree = policyFor('token-bucket', 10, 1_000, 3)
const threePerSecond = policyFor('token-bucket', 3, 1_000)

/** Steps through (offset from START, cost) pairs from `state`, committing allowed states. */
function run(policy: Policy, steps: [number, number][], state?: State) {
  return steps.map(([at, cost]) => {
    const result = tokenBucket.step(state, START + at, cost, policy)
    if (result.allowed) state = result.state
    return result
  })
}

describe('token-bucket: examples', () => {
  it('starts full, passes a burst, then refills at limit per period', () => {
    const results = run(tenPerSecond, [
      [0, 10],
      [0, 1],
      [99, 1],
      [100, 1],
    ])
    assert.deepEqual(
      results.map((r) => r.allowed),
      [true, false, false, true],
    )
    assert.equal(results[1].retryAfterMs, 100)
    assert.equal(results[2].retryAfterMs, 1)
    assert.equal(results[0].resetMs, 1_000)
  })

  it('caps what accumulates at burst', () => {
    const results = run(burstThree, [
      [0, 3],
      [5_000, 3],
      [5_000, 1],
    ])
    assert.deepEqual(
      results.map((r) => r.allowed),
      [true, true, false],
    )
    assert.deepEqual(
      results.map((r) => r.remaining),
      [0, 0, 0],
    )
    assert.equal(results[2].retryAfterMs, 100)
  })

  it('rounds a fractional refill time up: 1 token at 3 per second takes 334 ms', () => {
    const empty = [0, START]
    assert.equal(run(threePerSecond, [[0, 1]], empty)[0].retryAfterMs, 334)
    assert.equal(run(threePerSecond, [[333, 1]], empty)[0].allowed, false)
    assert.equal(run(threePerSecond, [[334, 1]], empty)[0].allowed, true)
  })

  it('accumulates a thousand 1 ms refills into exactly 3 tokens (no rounding drift)', () => {
    let state: State = [0, START]
    for (let t = 1; t <= 1_000; t++) state = tokenBucket.step(state, START + t, 0, threePerSecond).state
    const result = tokenBucket.step(state, START + 1_000, 3, threePerSecond)
    assert.equal(result.allowed, true)
  })

  it('denies a cost above burst, waiting until the bucket is full', () => {
    const [result] = run(burstThree, [[0, 4]], [1_000, START])
    assert.equal(result.allowed, false)
    assert.equal(result.resetMs, 200)
    assert.equal(result.retryAfterMs, 200)
  })

  it('peeks without taking tokens, and a peek passes even when the bucket is empty', () => {
    const [result] = run(tenPerSecond, [[0, 0]], [0, START])
    assert.deepEqual(result, { allowed: true, remaining: 0, resetMs: 1_000, retryAfterMs: 0, delayMs: 0, state: [0, START] })
  })

  it('refunds tokens, never beyond a full bucket', () => {
    const results = run(burstThree, [
      [0, 3],
      [0, -2],
      [0, -5],
    ])
    assert.deepEqual(
      results.map((r) => r.remaining),
      [0, 2, 3],
    )
    assert.deepEqual(results[2].state, [3_000, START])
  })

  it('forgets the state once the bucket would be full', () => {
    assert.equal(tokenBucket.ttlMs([1_500, START], START + 50, burstThree), 100)
    assert.equal(tokenBucket.ttlMs([3_000, START], START, burstThree), 1)
  })

  it('refills nothing when the clock steps back', () => {
    const [result] = run(tenPerSecond, [[-500, 0]], [0, START])
    assert.deepEqual(result.state, [0, START])
    assert.equal(result.remaining, 0)
  })
})

/** An exact non-negative rational n / d in BigInts. */
class Ratio {
  constructor(
    readonly n: bigint,
    readonly d: bigint,
  ) {}
  static of(n: number, d = 1): Ratio {
    return new Ratio(BigInt(n), BigInt(d))
  }
  plus(o: Ratio): Ratio {
    return new Ratio(this.n * o.d + o.n * this.d, this.d * o.d)
  }
  minus(o: Ratio): Ratio {
    return this.plus(new Ratio(-o.n, o.d))
  }
  atLeast(o: Ratio): boolean {
    return this.n * o.d >= o.n * this.d
  }
  min(o: Ratio): Ratio {
    return o.atLeast(this) ? this : o
  }
  floor(): number {
    return Number(this.n / this.d)
  }
}

/** A bucket holding a rational number of tokens, refilled at limit / periodMs per ms. */
function referenceDecisions(policy: Policy, steps: { now: number; cost: number }[]) {
  const full = Ratio.of(policy.burst)
  const perMs = (ms: number) => Ratio.of(ms * policy.limit, policy.periodMs)
  /** The fewest whole ms after which `tokens` grows to `target`, by search. */
  const waitFor = (tokens: Ratio, target: Ratio) => {
    let lo = 0
    let hi = Math.ceil((policy.burst * policy.periodMs) / policy.limit) + 1
    while (lo < hi) {
      const mid = Math.floor((lo + hi) / 2)
      if (tokens.plus(perMs(mid)).atLeast(target)) hi = mid
      else lo = mid + 1
    }
    return lo
  }
  let tokens = full
  let last: number | undefined
  return steps.map(({ now, cost }) => {
    if (last !== undefined) tokens = full.min(tokens.plus(perMs(now - last)))
    last = now
    const allowed = cost <= 0 || tokens.atLeast(Ratio.of(cost))
    let retryAfterMs = 0
    if (allowed && cost !== 0) tokens = full.min(tokens.minus(Ratio.of(cost)))
    const resetMs = waitFor(tokens, full)
    if (!allowed) retryAfterMs = cost > policy.burst ? resetMs : waitFor(tokens, Ratio.of(cost))
    return { allowed, remaining: tokens.floor(), resetMs, retryAfterMs }
  })
}

describe('token-bucket: properties', () => {
  it('decides as an exact rational bucket does, with the same exact waits', () => {
    fc.assert(
      fc.property(arbTrace('token-bucket'), (trace) => {
        const steps = replay(tokenBucket, trace)
        const expected = referenceDecisions(trace.policy, steps)
        steps.forEach(({ result }, i) => {
          assertWellFormed(result)
          const { allowed, remaining, resetMs, retryAfterMs } = result
          assert.deepEqual({ allowed, remaining, resetMs, retryAfterMs }, expected[i], `step ${i}`)
        })
        assertRetryAfterExact(tokenBucket, steps, trace.policy, trace.policy.burst)
        assertPeekKeepsState(tokenBucket, steps, trace.policy)
      }),
      { numRuns: 300 },
    )
  })

  it('admits at most burst + rate × (b − a) in every interval [a, b]', () => {
    fc.assert(
      fc.property(arbTrace('token-bucket', { refunds: false }), (trace) => {
        const { burst, limit, periodMs } = trace.policy
        const admitted = replay(tokenBucket, trace).filter(({ cost, result }) => cost > 0 && result.allowed)
        for (const { now: a } of admitted) {
          for (const { now: b } of admitted) {
            if (b < a) continue
            const sum = admitted.filter(({ now }) => now >= a && now <= b).reduce((total, { cost }) => total + cost, 0)
            // sum ≤ burst + (b - a) × limit / periodMs, multiplied out to stay in integers.
            assert.ok(sum * periodMs <= burst * periodMs + (b - a) * limit, `${sum} admitted in [${a}, ${b}]`)
          }
        }
      }),
      { numRuns: 300 },
    )
  })

  itForgetsAfterTtl(tokenBucket)
})

describe('token-bucket: the Lua twin', () => {
  const redis = useRedis()

  itMatchesLuaTwin(redis, tokenBucket)
})
