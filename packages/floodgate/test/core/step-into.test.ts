// The allocation-free forms decide exactly like the allocating ones: `step(…, out)` with one reused
// result equals `step(…)`, and `evaluateKeyInto` with one reused evaluation equals `evaluateKey`.

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import { ALGORITHM_BY_NAME } from '../../src/core/algorithms/index.js'
import { createStepResult, type State, type StepResult } from '../../src/core/algorithms/types.js'
import { createEvaluation, evaluateKey, evaluateKeyInto, type KeyEvaluation, type PolicyRecord } from '../../src/core/evaluate.js'
import { ALGORITHMS, createPolicy, type AlgorithmName, type Policy } from '../../src/core/policy.js'
import { arbTrace } from './algorithms/support.js'

const START = 1_700_000_000_000

function plain(result: StepResult | KeyEvaluation): unknown {
  return JSON.parse(JSON.stringify(result))
}

describe('step with a reused out', () => {
  for (const name of ALGORITHMS) {
    it(`${name}: equals a new result at every step, and never writes the state it reads`, () => {
      const algorithm = ALGORITHM_BY_NAME[name]
      fc.assert(
        fc.property(arbTrace(name, { clockStepsBack: true }), (trace) => {
          const out = createStepResult()
          let state: State | undefined
          let now = trace.start
          for (const { gap, cost } of trace.steps) {
            now += typeof gap === 'number' ? gap : 1
            const before = state?.slice()
            const fresh = algorithm.step(state, now, cost, trace.policy)
            const reused = algorithm.step(state, now, cost, trace.policy, out)
            assert.equal(reused, out, 'the result is out itself')
            assert.deepEqual(plain(reused), plain(fresh))
            assert.deepEqual(state, before, 'the input state is unchanged')
            // Kept as a store keeps it: the numbers copied into an array of its own.
            if (fresh.allowed) state = out.state.slice()
          }
        }),
        { numRuns: 150 },
      )
    })
  }
})

/** One request of a random multi-policy trace. */
interface Hit {
  gap: number
  cost: number
}

const arbPolicies = fc
  .array(
    fc.record({
      algorithm: fc.constantFrom<AlgorithmName>(...ALGORITHMS),
      limit: fc.integer({ min: 1, max: 6 }),
      periodMs: fc.constantFrom(7, 100, 1_000),
      blockMs: fc.constantFrom(undefined, undefined, 250),
    }),
    { minLength: 1, maxLength: 3 },
  )
  .map((specs) =>
    specs.map(
      (spec, i): Policy =>
        createPolicy({
          name: `p${i}`,
          algorithm: spec.algorithm,
          limit: spec.limit,
          period: spec.periodMs,
          ...(spec.blockMs === undefined ? {} : { blockMs: spec.blockMs }),
        }),
    ),
  )

const arbHits = fc.array(
  fc.record({ gap: fc.integer({ min: 0, max: 400 }), cost: fc.oneof(fc.constant(1), fc.constant(1), fc.integer({ min: -3, max: 4 })) }),
  { minLength: 1, maxLength: 40 },
)

describe('evaluateKeyInto with a reused evaluation', () => {
  it('equals evaluateKey on random multi-policy traces, records held as the memory store holds them', () => {
    fc.assert(
      fc.property(arbPolicies, arbHits, (policies, hits: Hit[]) => {
        const out = createEvaluation()
        let reference: (PolicyRecord | undefined)[] = policies.map(() => undefined)
        const held: (PolicyRecord | undefined)[] = policies.map(() => undefined)
        let now = START
        for (const { gap, cost } of hits) {
          now += gap
          const expected = evaluateKey(reference, now, cost, policies)
          const got = evaluateKeyInto(held, now, cost, policies, out)
          assert.deepEqual(plain(got), plain(expected))
          reference = expected.records
          for (let i = 0; i < policies.length; i++) {
            const next = got.records[i]
            held[i] = { blockedUntil: next.blockedUntil, state: next.state?.slice() }
          }
        }
      }),
      { numRuns: 200 },
    )
  })

  it('equals evaluateKey when its own records are fed back in (a step never writes what it reads)', () => {
    fc.assert(
      fc.property(arbPolicies, arbHits, (policies, hits: Hit[]) => {
        const out = createEvaluation()
        let reference: (PolicyRecord | undefined)[] = policies.map(() => undefined)
        let fedBack: readonly (PolicyRecord | undefined)[] = policies.map(() => undefined)
        let now = START
        for (const { gap, cost } of hits) {
          now += gap
          const expected = evaluateKey(reference, now, cost, policies)
          // Copies of the records (the objects are rewritten below), sharing their state arrays.
          const got = evaluateKeyInto(
            fedBack.map((r) => (r === undefined ? r : { ...r })),
            now,
            cost,
            policies,
            out,
          )
          assert.deepEqual(plain(got), plain(expected))
          reference = expected.records
          fedBack = got.records
        }
      }),
      { numRuns: 200 },
    )
  })

  it('resizes for sets of different sizes', () => {
    const one = [createPolicy({ algorithm: 'fixed-window', limit: 2, period: '1s' })]
    const three = [
      createPolicy({ name: 'a', algorithm: 'gcra', limit: 2, period: '1s' }),
      createPolicy({ name: 'b', algorithm: 'sliding-log', limit: 2, period: '1s' }),
      createPolicy({ name: 'c', algorithm: 'token-bucket', limit: 2, period: '1s' }),
    ]
    const out = createEvaluation()
    assert.equal(evaluateKeyInto([undefined, undefined, undefined], START, 1, three, out).results.length, 3)
    const small = evaluateKeyInto([undefined], START, 1, one, out)
    assert.equal(small.results.length, 1)
    assert.equal(small.records.length, 1)
    assert.equal(small.ttlMs.length, 1)
    assert.deepEqual(plain(small), plain(evaluateKey([undefined], START, 1, one)))
  })
})
