// Proofs for evaluateKey and decidingPolicy with real algorithms: all-or-nothing across policies,
// block periods, ttl, and which policy speaks for a decision.

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import {
  admitOneInto,
  createEvaluation,
  decidingPolicy,
  evaluateKey,
  evaluateKeyInto,
  type PolicyRecord,
  type PolicyResult,
} from '../../src/core/evaluate.js'
import { ALGORITHM_BY_NAME } from '../../src/core/algorithms/index.js'
import { ALGORITHMS, createPolicies, createPolicy, type AlgorithmName, type Policy, type PolicyOptions } from '../../src/core/policy.js'
import { createStepResult, type State } from '../../src/core/algorithms/types.js'

// Traces of realistic length (fast-check's default size keeps arrays to a handful of steps).
fc.configureGlobal({ baseSize: 'medium' })

// 2023-11-14T22:00:00Z: a whole hour, so epoch-aligned windows start with the tests.
const START = 1_699_999_200_000

/** A key's records as a store keeps them between calls. */
class Key {
  records: (PolicyRecord | undefined)[]
  constructor(readonly policies: Policy[]) {
    this.records = policies.map(() => undefined)
  }

  /** Evaluates and stores, as a store does (every record is written back, denied or not). */
  hit(now: number, cost = 1) {
    const evaluation = evaluateKey(this.records, now, cost, this.policies)
    this.records = evaluation.records.map((r) => ({ ...r }))
    return evaluation
  }
}

function key(...options: PolicyOptions[]): Key {
  return new Key(createPolicies(options))
}

describe('evaluateKey: all-or-nothing', () => {
  it('charges every policy when all allow', () => {
    const k = key({ algorithm: 'fixed-window', limit: 5, period: '1s' }, { algorithm: 'gcra', limit: 3, period: '1s' })
    const evaluation = k.hit(START)
    assert.equal(evaluation.allowed, true)
    assert.deepEqual(
      evaluation.results.map((r) => r.remaining),
      [4, 2],
    )
    assert.deepEqual(
      evaluation.results.map((r) => r.blocked),
      [false, false],
    )
  })

  it('charges no policy when one denies, and reports the allowing ones as stored', () => {
    const k = key({ algorithm: 'fixed-window', limit: 5, period: '1s' }, { algorithm: 'gcra', limit: 2, period: '1s' })
    k.hit(START)
    k.hit(START)
    const before = k.records.map((r) => r?.state)
    const denied = k.hit(START)
    assert.equal(denied.allowed, false)
    assert.deepEqual(
      denied.results.map((r) => r.allowed),
      [true, false],
    )
    assert.equal(denied.results[0].remaining, 3, 'the fixed window still has 3: the denied request was not counted')
    assert.deepEqual(
      k.records.map((r) => r?.state),
      before,
    )
    // And so the fixed window keeps its capacity for later: 3 more pass once gcra allows them.
    const results = [k.hit(START + 1_000), k.hit(START + 1_000), k.hit(START + 1_000)].map((e) => e.allowed)
    assert.deepEqual(results, [true, true, false])
  })

  it('peeks change nothing and refunds are always allowed', () => {
    const k = key({ algorithm: 'token-bucket', limit: 2, period: '1s' }, { algorithm: 'concurrency', limit: 1, period: '30s' })
    k.hit(START)
    const before = k.records.map((r) => r?.state)
    const peek = k.hit(START, 0)
    assert.equal(peek.allowed, true)
    assert.deepEqual(
      peek.results.map((r) => r.remaining),
      [1, 0],
    )
    assert.deepEqual(
      k.records.map((r) => r?.state),
      before,
    )
    const refund = k.hit(START, -1)
    assert.equal(refund.allowed, true)
    assert.deepEqual(
      refund.results.map((r) => r.remaining),
      [2, 1],
    )
  })

  it('passes a shaping delay through', () => {
    const k = key(
      { algorithm: 'leaky-bucket', limit: 10, period: '1s', shaping: true },
      { algorithm: 'fixed-window', limit: 100, period: '1m' },
    )
    k.hit(START)
    assert.deepEqual(
      k.hit(START).results.map((r) => r.delayMs),
      [100, 0],
    )
  })
})

describe('evaluateKey: block periods', () => {
  const blocking = (): Key =>
    key(
      { name: 'burst', algorithm: 'gcra', limit: 2, period: '1s', blockMs: '10s' },
      { name: 'hour', algorithm: 'fixed-window', limit: 100, period: '1h' },
    )

  it('denies with blocked = true until the block ends, after a denial that started it', () => {
    const k = blocking()
    k.hit(START)
    k.hit(START)
    const denial = k.hit(START + 100)
    assert.equal(denial.allowed, false)
    assert.deepEqual([denial.results[0].blocked, denial.results[0].retryAfterMs, denial.results[0].resetMs], [false, 10_000, 10_000])
    assert.equal(k.records[0]!.blockedUntil, START + 10_100)
    assert.equal(denial.results[1].blocked, false, 'only the denying policy blocks')
    assert.equal(k.records[1]!.blockedUntil, 0)

    // gcra alone would allow again at START + 500; the block holds until START + 10_100.
    const during = k.hit(START + 5_000)
    assert.equal(during.allowed, false)
    assert.deepEqual([during.results[0].blocked, during.results[0].retryAfterMs, during.results[0].remaining], [true, 5_100, 0])
    assert.equal(k.records[0]!.blockedUntil, START + 10_100, 'a blocked request does not extend the block')
    assert.equal(k.hit(START + 10_099).allowed, false)
    const after = k.hit(START + 10_100)
    assert.equal(after.allowed, true)
    assert.equal(k.records[0]!.blockedUntil, 0)
  })

  it('gives retryAfterMs ≥ blockMs when the block starts, and the longer wait when the algorithm needs more', () => {
    const k = key({ algorithm: 'fixed-window', limit: 1, period: '1m', blockMs: '5s' })
    k.hit(START)
    const denial = k.hit(START + 1_000)
    assert.equal(denial.results[0].retryAfterMs, 59_000)
    const short = key({ algorithm: 'gcra', limit: 1, period: '1s', blockMs: '5s' })
    short.hit(START)
    assert.equal(short.hit(START).results[0].retryAfterMs, 5_000)
  })

  it('starts no block on a denied peek or on a refund, and applies refunds during a block', () => {
    const wide = createPolicy({ name: 'p', algorithm: 'concurrency', limit: 3, period: '1m', blockMs: '10s' })
    const narrow = createPolicy({ name: 'p', algorithm: 'concurrency', limit: 1, period: '1m', blockMs: '10s' })
    let records: (PolicyRecord | undefined)[] = evaluateKey([undefined], START, 3, [wide]).records
    const peek = evaluateKey(records, START, 0, [narrow])
    assert.equal(peek.allowed, false, 'beyond the (reloaded) limit')
    assert.equal(peek.records[0].blockedUntil, 0)

    records = evaluateKey(records, START, 1, [narrow]).records
    assert.equal(records[0]!.blockedUntil, START + 10_000)
    const refund = evaluateKey(records, START + 1, -2, [narrow])
    assert.equal(refund.allowed, true)
    assert.equal(refund.results[0].blocked, false)
    assert.equal(refund.records[0].blockedUntil, START + 10_000, 'the block stays')
    assert.deepEqual(refund.records[0].state, [START + 60_000, 1])
  })

  it('keeps the record at least until the block ends', () => {
    const k = key({ algorithm: 'gcra', limit: 1, period: '10ms', blockMs: '1h' })
    k.hit(START)
    const denial = k.hit(START)
    assert.equal(denial.ttlMs[0], 3_600_000)
    const later = k.hit(START + 600_000)
    assert.equal(later.ttlMs[0], 3_000_000)
  })

  it('keeps nothing longer than needed for a key with no state', () => {
    const peek = evaluateKey([undefined], START, 0, createPolicies([{ algorithm: 'fixed-window', limit: 1, period: '1s' }]))
    assert.ok(peek.ttlMs[0] >= 1 && peek.ttlMs[0] <= 1_000)
  })

  it('reports a blocked key as denied to a peek too, and lets a refund through', () => {
    const k = blocking()
    k.hit(START)
    k.hit(START)
    k.hit(START + 100)
    const peek = k.hit(START + 1_000, 0)
    assert.equal(peek.allowed, false)
    assert.equal(peek.results[0].blocked, true)
    assert.equal(k.hit(START + 1_000, -1).allowed, true)
  })

  it('during a block, retryAfterMs also covers the algorithm’s own wait', () => {
    const k = key({ algorithm: 'fixed-window', limit: 1, period: '1m', blockMs: '5s' })
    k.hit(START)
    k.hit(START + 1_000) // denied: the window ends at START + 60 s, the block at START + 6 s
    const during = k.hit(START + 2_000)
    const retry = START + 2_000 + during.results[0].retryAfterMs
    assert.equal(k.hit(retry).allowed, true, `denied again at the promised time (retryAfterMs ${during.results[0].retryAfterMs})`)
  })
})

describe('decidingPolicy', () => {
  const result = (allowed: boolean, remaining: number, retryAfterMs: number): PolicyResult => ({
    allowed,
    remaining,
    retryAfterMs,
    resetMs: retryAfterMs,
    delayMs: 0,
    blocked: false,
  })

  it('picks the denying policy with the longest wait, ignoring allowing ones', () => {
    assert.equal(decidingPolicy([result(true, 0, 0), result(false, 0, 500), result(false, 3, 2_000), result(false, 0, 100)]), 2)
    assert.equal(decidingPolicy([result(false, 0, 10), result(true, 0, 0)]), 0)
  })

  it('picks the tightest allowing policy when all allow, the first on ties', () => {
    assert.equal(decidingPolicy([result(true, 5, 0), result(true, 2, 0), result(true, 2, 0), result(true, 9, 0)]), 1)
    assert.equal(decidingPolicy([result(true, 5, 0)]), 0)
  })

  it('picks the first of equally long waits', () => {
    assert.equal(decidingPolicy([result(true, 0, 0), result(false, 0, 700), result(false, 0, 700)]), 1)
  })
})

/** Random sets of 1–3 policies over every algorithm, some with a block period. */
const arbPolicies: fc.Arbitrary<Policy[]> = fc
  .array(
    fc.record({
      algorithm: fc.constantFrom<AlgorithmName>(...ALGORITHMS),
      limit: fc.integer({ min: 1, max: 6 }),
      period: fc.constantFrom(10, 100, 1_000, 3_000),
      blockMs: fc.constantFrom(0, 0, 50, 2_000),
      shaping: fc.boolean(),
    }),
    { minLength: 1, maxLength: 3 },
  )
  .map((list) =>
    createPolicies(
      list.map(({ algorithm, limit, period, blockMs, shaping }, i) => ({
        name: `p${i}`,
        algorithm,
        limit,
        period,
        ...(blockMs > 0 ? { blockMs } : {}),
        ...(algorithm === 'leaky-bucket' && shaping ? { shaping } : {}),
      })),
    ),
  )

const arbSteps = fc.array(
  fc.record({
    gap: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 200 }), fc.integer({ min: 0, max: 4_000 })),
    cost: fc.integer({ min: -2, max: 4 }),
  }),
  { minLength: 1, maxLength: 40 },
)

describe('evaluateKey: properties', () => {
  it('equals each policy stepped alone, committed only when every policy allows, with blocks as specified', () => {
    fc.assert(
      fc.property(arbPolicies, arbSteps, (policies, steps) => {
        let records: (PolicyRecord | undefined)[] = policies.map(() => undefined)
        // The model: each policy's state and block deadline, kept apart from evaluateKey's records.
        let states: (State | undefined)[] = policies.map(() => undefined)
        let blocks: number[] = policies.map(() => 0)
        let now = START
        for (const { gap, cost } of steps) {
          now += gap
          const evaluation = evaluateKey(records, now, cost, policies)
          const blocked = policies.map((_, i) => cost >= 0 && blocks[i] > now)
          const alone = policies.map((p, i) => ALGORITHM_BY_NAME[p.algorithm].step(states[i], now, cost, p))
          const allowed = policies.every((_, i) => !blocked[i] && alone[i].allowed)
          assert.equal(evaluation.allowed, allowed)
          assert.equal(
            evaluation.allowed,
            evaluation.results.every((r) => r.allowed),
          )
          for (let i = 0; i < policies.length; i++) {
            const got = evaluation.results[i]
            assert.equal(got.blocked, blocked[i])
            if (blocked[i]) {
              // The wait covers the block and, after it, the algorithm's own wait.
              const algorithmWait = alone[i].allowed ? 0 : alone[i].retryAfterMs
              assert.deepEqual([got.allowed, got.retryAfterMs], [false, Math.max(blocks[i] - now, algorithmWait)])
            } else if (allowed || !alone[i].allowed) {
              assert.equal(got.allowed, alone[i].allowed)
              assert.equal(got.remaining, alone[i].remaining)
              if (!alone[i].allowed && cost > 0 && policies[i].blockMs > 0) {
                assert.equal(got.retryAfterMs, Math.max(alone[i].retryAfterMs, policies[i].blockMs))
                assert.ok(got.retryAfterMs >= policies[i].blockMs)
              } else {
                assert.equal(got.retryAfterMs, alone[i].retryAfterMs)
              }
            } else {
              // Would have allowed, but another policy denied: reported as it stands, uncharged.
              const peek = ALGORITHM_BY_NAME[policies[i].algorithm].step(states[i], now, 0, policies[i])
              assert.deepEqual([got.allowed, got.remaining], [peek.allowed, peek.remaining])
            }
          }
          // Commit as the model says; blocks start only on a charge the policy itself denied.
          for (let i = 0; i < policies.length; i++) {
            if (allowed) states[i] = alone[i].state
            else if (!blocked[i] && !alone[i].allowed && cost > 0 && policies[i].blockMs > 0) blocks[i] = now + policies[i].blockMs
          }
          states = [...states]
          blocks = blocks.map((b) => (b > now ? b : 0))
          for (let i = 0; i < policies.length; i++) {
            const record = evaluation.records[i]
            assert.deepEqual(record.state, states[i])
            assert.equal(record.blockedUntil, blocks[i])
            const ttl = evaluation.ttlMs[i]
            assert.ok(Number.isInteger(ttl) && ttl >= 1)
            if (blocks[i] > 0) assert.ok(now + ttl >= blocks[i], 'the record outlives its block')
          }
          records = evaluation.records.map((r) => ({ ...r }))
        }
      }),
      { numRuns: 300 },
    )
  })
})

describe('admitOneInto: the one-policy admission', () => {
  it('answers as evaluateKeyInto wherever it answers, and declines exactly a denial', () => {
    fc.assert(
      fc.property(
        arbPolicies.map((policies) => policies[0]),
        arbSteps,
        (policy, steps) => {
          let record: PolicyRecord | undefined
          const general = createEvaluation()
          const fast = createEvaluation()
          const buffer = createStepResult()
          let now = START
          for (const { gap, cost } of steps) {
            now += gap
            const expected = evaluateKeyInto([record], now, cost, [policy], general)
            if (cost > 0 && (record === undefined || record.blockedUntil <= now)) {
              const admitted = admitOneInto(record?.state, now, cost, policy, fast, buffer)
              assert.equal(admitted, expected.allowed)
              if (admitted) {
                assert.deepEqual(fast.results, expected.results)
                assert.deepEqual(fast.records, expected.records)
                assert.deepEqual(fast.ttlMs, expected.ttlMs)
                assert.equal(fast.allowed, true)
              }
            }
            // Kept as a store keeps it: its own copy of the general answer.
            const next = expected.records[0]
            record = { blockedUntil: next.blockedUntil, state: next.state?.slice() }
          }
        },
      ),
      { numRuns: 300 },
    )
  })
})
