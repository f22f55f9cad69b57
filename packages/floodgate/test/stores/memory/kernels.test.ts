// The memory store's one-policy kernels (src/stores/memory/kernels/, generated from each algorithm's
// definition) against the general path: random traces give the same decisions, the same record
// words and, in a store under eviction pressure, the same keys kept in the same classes.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import { evaluateKey, type PolicyRecord } from '../../../src/core/evaluate.js'
import { createPolicies, createPolicy, type AlgorithmName, type Policy, type PolicyOptions } from '../../../src/core/policy.js'
import { KERNELS } from '../../../src/stores/memory/kernels/index.js'
import { createKernelStep } from '../../../src/stores/memory/kernel-step.js'
import { MemoryStore } from '../../../src/stores/memory/memory-store.js'
import type { KeyTable } from '../../../src/stores/memory/key-table.js'
import type { Layouts } from '../../../src/stores/memory/layouts.js'
import { advanceArbitrary, costArbitrary, policyOptionsArbitrary } from '../trace-arbitraries.js'

const T0 = 1_700_000_000_000
const WITH_KERNELS = Object.keys(KERNELS) as AlgorithmName[]

/** Small limits (traces reach them) or big ones (a unit is owed back within milliseconds, so states lapse). */
const policyArbitrary: fc.Arbitrary<PolicyOptions> = fc.oneof(
  policyOptionsArbitrary('p', WITH_KERNELS),
  fc
    .record({
      name: fc.constant('p'),
      algorithm: fc.constantFrom(...WITH_KERNELS),
      limit: fc.integer({ min: 10_000, max: 1_000_000_000 }),
      period: fc.constantFrom(1_000, 60_000, 3_600_000),
      burst: fc.option(fc.integer({ min: 1, max: 1_000_000_000 }), { nil: undefined }),
      shaping: fc.boolean(),
    })
    .map(({ shaping, ...rest }): PolicyOptions => ({ ...rest, ...(rest.algorithm === 'leaky-bucket' ? { shaping } : {}) })),
)

/** Costs of the shared traces, and costs far above any small limit. */
const anyCost = fc.oneof({ arbitrary: costArbitrary, weight: 5 }, { arbitrary: fc.integer({ min: 9, max: 2_000_000_000 }), weight: 1 })
/** The shared advances, and now and then a clock that steps back. */
const anyAdvance = fc.oneof({ arbitrary: advanceArbitrary, weight: 6 }, { arbitrary: fc.integer({ min: -2_000, max: -1 }), weight: 1 })

const step = fc.record({ advance: anyAdvance, cost: anyCost })

describe('one-policy kernels', () => {
  it('every algorithm whose state has fixed words has a kernel, with its words', () => {
    assert.deepEqual(WITH_KERNELS.sort(), ['fixed-window', 'gcra', 'leaky-bucket', 'sliding-window', 'token-bucket'])
    for (const [name, words] of [
      ['fixed-window', 2],
      ['sliding-window', 3],
      ['token-bucket', 2],
      ['leaky-bucket', 3],
      ['gcra', 3],
    ] as const) {
      assert.equal(KERNELS[name]!.words, words, name)
    }
  })

  it('decide equal evaluateKey on one record: results, expiry and state words (lapses, big limits, costs 0 and above the limit)', () => {
    fc.assert(
      fc.property(policyArbitrary, fc.array(step, { minLength: 1, maxLength: 80 }), (options, trace) => {
        const policy = createPolicy(options)
        const kernel = KERNELS[policy.algorithm]!
        const words = new Float64Array(1 + Math.max(2, kernel.words))
        // A record held but with no state yet, as KeyTable.insert leaves it.
        words.fill(Number.NaN)
        words[2] = -1
        let expiresAt = Number.NaN
        let record: PolicyRecord | undefined
        const out = createKernelStep()
        let now = T0
        for (const { advance, cost } of trace) {
          now += advance
          const live = now < expiresAt ? record : undefined
          const general = evaluateKey([live], now, cost, [policy])
          const before = words.slice()
          const decided = KERNELS[policy.algorithm]!.decide(words, 0, now, cost, policy, out)
          if (!decided) {
            // Only a denial that starts a block is left to the general path, and nothing was written.
            assert.ok(!general.allowed && cost > 0 && policy.blockMs > 0)
            assert.deepEqual(words, before)
            return
          }
          const result = general.results[0]
          assert.deepEqual(
            [out.allowed, out.remaining, out.resetMs, out.retryAfterMs, out.delayMs],
            [result.allowed, result.remaining, result.resetMs, result.retryAfterMs, result.delayMs],
            `at +${now - T0} ms, cost ${cost}`,
          )
          expiresAt = now + general.ttlMs[0]
          record = general.records[0]
          assert.equal(words[0], expiresAt)
          if (record.state === undefined) assert.deepEqual([words[1], words[2]], [Number.NaN, -1])
          else assert.deepEqual(Array.from(words.subarray(1, 1 + record.state.length)), record.state)
        }
      }),
      { numRuns: 400 },
    )
  })

  it('a store deciding with kernels (evaluateSync, decideOne) keeps exactly what the general path keeps, under eviction pressure', () => {
    const request = fc.record({ key: fc.integer({ min: 0, max: 9 }), set: fc.nat(2), advance: anyAdvance, cost: anyCost })
    fc.assert(
      fc.property(
        fc.array(policyArbitrary, { minLength: 2, maxLength: 2 }),
        fc.array(request, { minLength: 1, maxLength: 120 }),
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 200, max: 2_000 }),
        (options, trace, maxKeys, maxBytes) => {
          const [a, b] = createPolicies(options.map((o, i) => ({ ...o, name: `p${i}` })))
          // Two one-policy sets (kernels) and a set of both (the general path), on the same keys.
          const sets: Policy[][] = [[a], [b], [a, b]]
          let now = T0
          const fast = new MemoryStore({ maxKeys, maxBytes })
          const general = new MemoryStore({ maxKeys, maxBytes })
          ;(general as unknown as { layouts: Layouts }).layouts.kernels = {}
          // The limiter's direct path asks decideOne (a set of one, the store's clock).
          const direct = new MemoryStore({ maxKeys, maxBytes, clock: () => now })
          for (const { key, set, advance, cost } of trace) {
            now += advance
            const policies = sets[set]
            const one = fast.evaluateOne(`k${key}`, policies, cost, now)
            const other = general.evaluateOne(`k${key}`, policies, cost, now)
            assert.deepEqual(one, other, `k${key} at +${now - T0} ms, cost ${cost}`)
            if (policies.length === 1) {
              const { allowed, remaining, resetMs, retryAfterMs, delayMs, blocked } = direct.decideOne(`k${key}`, policies, cost)
              assert.deepEqual({ allowed, remaining, resetMs, retryAfterMs, delayMs, blocked }, other.results[0], `decideOne k${key}`)
            } else {
              direct.evaluateOne(`k${key}`, policies, cost, now)
            }
            const [x, y, z] = [tableOf(fast), tableOf(general), tableOf(direct)]
            for (const table of [x, z]) {
              assert.deepEqual([...table.open.keys()], [...y.open.keys()])
              assert.deepEqual([...table.guarded.keys()], [...y.guarded.keys()])
              assert.equal(table.bytes, y.bytes)
              assert.deepEqual(Array.from(table.slab.f64), Array.from(y.slab.f64))
            }
          }
        },
      ),
      { numRuns: 300 },
    )
  })

  it('a denied key is protected from a flood of new keys when decided by a kernel', () => {
    const [policy] = createPolicies([{ algorithm: 'gcra', limit: 4, period: '1h' }])
    const store = new MemoryStore({ maxKeys: 3 })
    // Held after the first: the kernel decides the others, and the last denies.
    for (let i = 0; i < 4; i++) store.evaluateOne('abuser', [policy], 1, T0)
    assert.equal(store.evaluateOne('abuser', [policy], 1, T0).allowed, false)
    for (let i = 0; i < 10; i++) store.evaluateOne(`new${i}`, [policy], 1, T0)
    assert.equal(store.evaluateOne('abuser', [policy], 0, T0).allowed, true)
    assert.equal(store.evaluateOne('abuser', [policy], 1, T0).allowed, false, 'still limited: not evicted and forgiven')
  })
})

function tableOf(store: MemoryStore): KeyTable {
  return (store as unknown as { table: KeyTable }).table
}
