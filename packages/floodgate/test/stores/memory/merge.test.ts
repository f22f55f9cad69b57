// MemoryStore.merge: units charged past the limit, answered as records; idempotent per (origin, seq);
// bad requests refused whole.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { MemoryStore } from '../../../src/stores/memory/memory-store.js'
import { MAX_ORIGINS } from '../../../src/stores/memory/merge-origins.js'
import { createPolicies } from '../../../src/core/policy.js'
import { FloodgateError } from '../../../src/core/errors.js'

const START = 1_700_000_000_000
const policies = createPolicies([
  { name: 'window', algorithm: 'fixed-window', limit: 10, period: '1s', sync: 'write-back' },
  { name: 'bucket', algorithm: 'gcra', limit: 10, period: '1s', sync: 'write-back' },
])

describe('MemoryStore.merge', () => {
  it('charges past the limit, and a decision then sees the debt', async () => {
    const store = new MemoryStore()
    const [merged] = await store.merge([{ key: 'k', policies, units: 15, now: START }])
    assert.deepEqual(merged.records[0], { blockedUntil: 0, state: [START, 15] })
    assert.equal(merged.applied, true)
    const decision = store.evaluateOne('k', policies, 1, START + 1)
    assert.equal(decision.allowed, false)
    assert.deepEqual(
      decision.results.map((result) => result.remaining),
      [0, 0],
    )
  })

  it('applies a replayed (origin, seq) once, per origin, and answers the state either way', async () => {
    const store = new MemoryStore()
    const first = await store.merge([{ key: 'k', policies, units: 3, now: START, origin: 'a', seq: 7 }])
    const again = await store.merge([{ key: 'k', policies, units: 3, now: START, origin: 'a', seq: 7 }])
    const older = await store.merge([{ key: 'k', policies, units: 3, now: START, origin: 'a', seq: 6 }])
    assert.deepEqual([first[0].applied, again[0].applied, older[0].applied], [true, false, false])
    assert.deepEqual(again[0].records, first[0].records)
    const [other] = await store.merge([{ key: 'k', policies, units: 2, now: START, origin: 'b', seq: 7 }])
    const [next] = await store.merge([{ key: 'k', policies, units: 1, now: START, origin: 'a', seq: 8 }])
    assert.equal(other.applied, true)
    assert.deepEqual(next.records[0].state, [START, 6])
  })

  it('a read (0 units) of an unknown key keeps nothing; an expired record forgets its origins', async () => {
    const store = new MemoryStore()
    const [read] = await store.merge([{ key: 'none', policies, units: 0, now: START }])
    assert.deepEqual(read.records, [
      { blockedUntil: 0, state: undefined },
      { blockedUntil: 0, state: undefined },
    ])
    assert.equal(store.size, 0)
    await store.merge([{ key: 'k', policies, units: 1, now: START, origin: 'a', seq: 1 }])
    const [later] = await store.merge([{ key: 'k', policies, units: 1, now: START + 5_000, origin: 'a', seq: 1 }])
    assert.equal(later.applied, true)
    assert.deepEqual(later.records[0].state, [START + 5_000, 1])
  })

  it(`remembers at most ${MAX_ORIGINS} origins per record, then starts again`, async () => {
    const store = new MemoryStore()
    for (let i = 0; i < MAX_ORIGINS; i++) await store.merge([{ key: 'k', policies, units: 0, now: START, origin: `o${i}`, seq: 1 }])
    for (let i = 0; i < MAX_ORIGINS; i++) await store.merge([{ key: 'k', policies, units: 1, now: START, origin: `o${i}`, seq: 1 }])
    const [replay] = await store.merge([{ key: 'k', policies, units: 1, now: START, origin: 'o0', seq: 1 }])
    assert.equal(replay.applied, false)
    await store.merge([{ key: 'k', policies, units: 1, now: START, origin: 'new', seq: 1 }])
    const [forgotten] = await store.merge([{ key: 'k', policies, units: 1, now: START, origin: 'o0', seq: 1 }])
    assert.equal(forgotten.applied, true)
  })

  it('refuses a bad request whole, naming the field', async () => {
    const store = new MemoryStore()
    const bad = [
      [{ key: 'k', policies, units: 1.5 }, /units must be a whole number/],
      [{ key: 'k', policies, units: 1, origin: 'a' }, /origin and seq go together/],
      [{ key: 'k', policies, units: 1, origin: 'a', seq: -1 }, /seq must be a whole number ≥ 0/],
      [{ key: 'k', policies: createPolicies([{ algorithm: 'sliding-log', limit: 1, period: '1s' }]), units: 1 }, /every timestamp/],
    ] as const
    for (const [request, message] of bad) {
      const refused = (error: unknown) => error instanceof FloodgateError && error.code === 'INVALID_REQUEST' && message.test(error.message)
      await assert.rejects(store.merge([request as never]), refused)
    }
    assert.equal(store.size, 0)
  })
})
