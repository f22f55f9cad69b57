// Proofs for GCRA: examples, an exact token-bucket reference in rationals, the rate invariant,
// exact retryAfterMs, peeks, ttl, and the Lua twin on a real Redis.

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import { gcra } from '../../../src/core/algorithms/gcra.js'
import type { Policy } from '../../../src/core/policy.js'
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
  assertRateBound,
} from './support.js'
import { luaStep, luaTtl } from '../../support/lua-step.js'

// Traces of realistic length (fast-check's default size keeps arrays to a handful of steps).
fc.configureGlobal({ baseSize: 'medium' })

/** Steps a trace of [gap, cost] pairs from no state, keeping state only when allowed. */
function run(policy: Policy, steps: [number, number][], start = START) {
  let state: number[] | undefined
  let now = start
  return steps.map(([gap, cost]) => {
    now += gap
    const result = gcra.step(state, now, cost, policy)
    if (result.allowed) state = result.state
    return result
  })
}

describe('gcra: examples', () => {
  it('admits a burst of `burst` at once, then one per interval, even when the interval is not whole', () => {
    const policy = policyFor('gcra', 3, 1_000) // interval 333.33… ms
    const [a, b, c, d] = run(policy, [
      [0, 1],
      [0, 1],
      [0, 1],
      [0, 1],
    ])
    assert.deepEqual([a.allowed, b.allowed, c.allowed, d.allowed], [true, true, true, false])
    assert.deepEqual([a.remaining, b.remaining, c.remaining, d.remaining], [2, 1, 0, 0])
    assert.equal(d.retryAfterMs, 334) // ceil(333.33…)
    assert.equal(c.resetMs, 1_000)
    const [, , , , early, onTime] = run(policy, [
      [0, 1],
      [0, 1],
      [0, 1],
      [0, 1],
      [333, 1],
      [1, 1],
    ])
    assert.equal(early.allowed, false)
    assert.equal(early.retryAfterMs, 1)
    assert.equal(onTime.allowed, true)
  })

  it('holds a greedy client to exactly limit per period over a long run (no drift from rounding)', () => {
    const policy = policyFor('gcra', 3, 1_000) // interval 333.33… ms
    let state: number[] | undefined
    let now = START
    let admitted = 0
    for (let i = 0; i < 10_000 && now <= START + 600_000; i++) {
      const result = gcra.step(state, now, 1, policy)
      if (result.allowed) {
        state = result.state
        admitted++
      } else {
        assert.ok(result.retryAfterMs > 0)
        now += result.retryAfterMs
      }
    }
    // The first burst of 3, then one per 333.33… ms for 600 s.
    assert.equal(admitted, 3 + 1_800)
  })

  it('lets burst exceed limit: burst units pass at once, the rate stays limit per period', () => {
    const policy = policyFor('gcra', 1, 1_000, 5)
    const results = run(policy, [
      [0, 1],
      [0, 1],
      [0, 1],
      [0, 1],
      [0, 1],
      [0, 1],
      [1_000, 1],
      [0, 1],
    ])
    assert.deepEqual(
      results.map((r) => r.allowed),
      [true, true, true, true, true, false, true, false],
    )
    assert.equal(results[5].retryAfterMs, 1_000)
  })

  it('charges a cost as that many units and denies a cost above burst with the time to full restore', () => {
    const policy = policyFor('gcra', 10, 1_000)
    const [a, b, c] = run(policy, [
      [0, 4],
      [0, 7],
      [0, 11],
    ])
    assert.equal(a.remaining, 6)
    assert.equal(b.allowed, false)
    assert.equal(b.retryAfterMs, 100)
    assert.equal(b.remaining, 6)
    assert.equal(c.allowed, false)
    assert.equal(c.retryAfterMs, c.resetMs)
    assert.equal(c.resetMs, 400)
    assert.equal(gcra.step(undefined, START, 11, policy).retryAfterMs, 0, 'fresh: already fully restored')
  })

  it('peeks without charging and refunds without going past a fresh state', () => {
    const policy = policyFor('gcra', 5, 1_000)
    const full = run(policy, [[0, 5]])[0]
    const peek = gcra.step(full.state, START, 0, policy)
    assert.equal(peek.allowed, true, 'at the limit is not beyond it')
    assert.equal(peek.remaining, 0)
    assert.deepEqual(peek.state, full.state)
    const refund = gcra.step(full.state, START, -2, policy)
    assert.equal(refund.allowed, true)
    assert.equal(refund.remaining, 2)
    const tooMuch = gcra.step(full.state, START, -100, policy)
    assert.equal(tooMuch.remaining, 5)
    assert.deepEqual(tooMuch.state, gcra.step(undefined, START, 0, policy).state)
  })

  it('denies a peek on a key beyond its limit (a reloaded, tighter policy over the same state)', () => {
    const wide = policyFor('gcra', 10, 1_000)
    const narrow = policyFor('gcra', 5, 1_000, 2)
    const state = run(wide, [[0, 10]])[0].state
    const peek = gcra.step(state, START, 0, narrow)
    assert.equal(peek.allowed, false)
    assert.equal(peek.retryAfterMs, 600) // the TAT is 1000 ms ahead; the tolerance is now 400 ms
  })

  it('reads a TAT stored under another limit as the same time, rounded up to the millisecond', () => {
    const before = policyFor('gcra', 3, 1_000)
    const after = policyFor('gcra', 4, 1_000)
    const state = run(before, [[0, 1]])[0].state // TAT = START + 333.33… ms
    assert.deepEqual(state, [START + 333, 1, 3])
    assert.equal(gcra.ttlMs(state, START, after), 334)
    assert.equal(gcra.step(state, START, 0, after).resetMs, 334)
    assert.equal(gcra.step(state, START + 334, 0, after).resetMs, 0)
  })

  it('is stricter, never looser, when the clock steps back', () => {
    const policy = policyFor('gcra', 2, 1_000)
    const [, second] = run(policy, [
      [0, 1],
      [0, 1],
    ])
    assert.equal(gcra.step(second.state, START - 5_000, 1, policy).allowed, false)
  })
})

/**
 * The reference: a token bucket in exact integers (BigInt), written independently of the TAT.
 * Tokens are counted in periodMs-ths of a unit so that `limit` of them refill per ms.
 */
class TokenBucketReference {
  private tokens: bigint
  private last: bigint
  private readonly capacity: bigint
  constructor(
    private readonly policy: Policy,
    start: number,
  ) {
    this.capacity = BigInt(policy.burst) * BigInt(policy.periodMs)
    this.tokens = this.capacity
    this.last = BigInt(start)
  }

  step(now: number, cost: number): { allowed: boolean; remaining: number; resetMs: number; retryAfterMs: number } {
    const P = BigInt(this.policy.periodMs)
    const L = BigInt(this.policy.limit)
    const t = BigInt(now)
    if (t > this.last) {
      this.tokens = min(this.capacity, this.tokens + (t - this.last) * L)
      this.last = t
    }
    const need = BigInt(cost) * P
    let allowed = true
    if (cost > 0) {
      allowed = this.tokens >= need
      if (allowed) this.tokens -= need
    } else if (cost < 0) {
      this.tokens = min(this.capacity, this.tokens - need)
    }
    const resetMs = ceilDiv(this.capacity - this.tokens, L)
    let retryAfterMs = 0n
    if (!allowed) retryAfterMs = cost > this.policy.burst ? resetMs : ceilDiv(need - this.tokens, L)
    return { allowed, remaining: Number(this.tokens / P), resetMs: Number(resetMs), retryAfterMs: Number(retryAfterMs) }
  }
}

function min(a: bigint, b: bigint): bigint {
  return a < b ? a : b
}

function ceilDiv(a: bigint, b: bigint): bigint {
  return a <= 0n ? 0n : (a + b - 1n) / b
}

describe('gcra: properties', () => {
  it('decides exactly as a token bucket in exact arithmetic, number for number', () => {
    fc.assert(
      fc.property(arbTrace('gcra', { maxLimit: 1_000 }), (trace) => {
        const reference = new TokenBucketReference(trace.policy, trace.start)
        for (const { now, cost, result } of replay(gcra, trace)) {
          assertWellFormed(result)
          const { allowed, remaining, resetMs, retryAfterMs } = result
          assert.deepEqual({ allowed, remaining, resetMs, retryAfterMs }, reference.step(now, cost), `at ${now - trace.start} cost ${cost}`)
        }
      }),
      { numRuns: 300 },
    )
  })

  it('never admits more than burst + (b − a) / interval in any interval [a, b]', () => {
    fc.assert(
      fc.property(arbTrace('gcra', { refunds: false }), (trace) => assertRateBound(replay(gcra, trace), trace.policy)),
      { numRuns: 300 },
    )
  })

  it('gives exact retryAfterMs, keeps state on peeks, and forgets after ttlMs', () => {
    fc.assert(
      fc.property(arbTrace('gcra', { maxLimit: 100 }), (trace) => {
        const steps = replay(gcra, trace)
        assertRetryAfterExact(gcra, steps, trace.policy, trace.policy.burst)
        assertPeekKeepsState(gcra, steps, trace.policy)
        assertTtlForgets(gcra, steps, trace.policy)
      }),
      { numRuns: 150 },
    )
  })

  it('keeps numbers small on a key that is never idle', () => {
    const policy = policyFor('gcra', 7, 1_000, 7)
    let state: number[] | undefined
    for (let now = START; now < START + 600_000; now += 143) {
      const result = gcra.step(state, now, 1, policy)
      if (result.allowed) state = result.state
    }
    assert.ok(state !== undefined && state[1] >= 0 && state[1] < policy.limit, `ticks ${state?.[1]}`)
  })
})

describe('gcra: the Lua twin', () => {
  const redis = useRedis()
  itMatchesLuaTwin(redis, gcra, { maxLimit: 1_000 })

  it('reads a state stored under another limit exactly as TypeScript does', async () => {
    await fc.assert(
      fc.asyncProperty(arbTrace('gcra', { maxLimit: 50, maxSteps: 10 }), fc.integer({ min: 1, max: 60 }), async (trace, limit) => {
        const reloaded = policyFor('gcra', limit, trace.policy.periodMs, trace.policy.burst)
        for (const { now, cost, result } of replay(gcra, trace)) {
          assert.deepEqual(
            await luaStep(redis(), 'gcra', result.state, now + 1, cost, reloaded),
            gcra.step(result.state, now + 1, cost, reloaded),
          )
          assert.equal(await luaTtl(redis(), 'gcra', result.state, now, reloaded), gcra.ttlMs(result.state, now, reloaded))
        }
      }),
      { numRuns: 60 },
    )
  })
})
