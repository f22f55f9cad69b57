// Proof of leases against each algorithm's own guarantee: random instances take, spend, return, lose
// and renew leases (and make exact decisions between them), and what they admit never breaks it.

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import { MAX_LEASES, type LeaseAsk } from '../../src/core/lease.js'
import { LeaseModelStore } from './lease-model.js'
import { createPolicy, type AlgorithmName, type Policy } from '../../src/core/policy.js'

const START = 1_700_000_000_000

/** One thing that happens in a trace. */
type Op =
  | { kind: 'wait'; ms: number }
  | { kind: 'take'; instance: number; want: number; need: number; leaseMs: number }
  | { kind: 'spend'; instance: number; cost: number }
  | { kind: 'drain'; instance: number }
  | { kind: 'return'; instance: number; twice: boolean }
  | { kind: 'crash'; instance: number }
  | { kind: 'exact'; cost: number }
  | { kind: 'release'; instance: number }

const INSTANCES = 4

function arbOps(limit: number): fc.Arbitrary<Op[]> {
  const instance = fc.integer({ min: 0, max: INSTANCES - 1 })
  return fc.array(
    fc.oneof(
      fc.record({
        kind: fc.constant('wait' as const),
        ms: fc.oneof(fc.integer({ min: 0, max: 30 }), fc.integer({ min: 0, max: 3000 }), fc.constantFrom(1, 99, 100, 999, 1000)),
      }),
      fc.record({
        kind: fc.constant('take' as const),
        instance,
        want: fc.integer({ min: 1, max: limit + 2 }),
        need: fc.integer({ min: 0, max: 3 }),
        leaseMs: fc.oneof(fc.integer({ min: 1, max: 2000 }), fc.constantFrom(1, 10, 100)),
      }),
      fc.record({ kind: fc.constant('spend' as const), instance, cost: fc.integer({ min: 1, max: 3 }) }),
      fc.record({ kind: fc.constant('drain' as const), instance }),
      fc.record({ kind: fc.constant('return' as const), instance, twice: fc.boolean() }),
      fc.record({ kind: fc.constant('crash' as const), instance }),
      fc.record({ kind: fc.constant('exact' as const), cost: fc.integer({ min: 0, max: 3 }) }),
      fc.record({ kind: fc.constant('release' as const), instance }),
    ),
    { maxLength: 60 },
  )
}

interface Held {
  id: number
  balance: number
  granted: number
  expiresAt: number
  /** Concurrency: admitted units still in flight, with their admission time. */
  inFlight: number
}

/** Admissions as they happened: time and units (a release is negative units for concurrency). */
interface Admission {
  at: number
  units: number
  /** Concurrency: when the slot is free again (release or the lease's end). */
  until?: number
}

/** Runs a trace through leaseKey with INSTANCES instances; returns every admission. */
function run(policy: Policy, ops: Op[], start: number): Admission[] {
  const store = new LeaseModelStore()
  const held: (Held | undefined)[] = new Array(INSTANCES).fill(undefined)
  const slots: Admission[][] = Array.from({ length: INSTANCES }, () => [])
  const admitted: Admission[] = []
  let now = start
  let nextId = 1
  const live = (i: number) => {
    const lease = held[i]
    if (lease !== undefined && now >= lease.expiresAt) {
      // The lease ended by itself: its slots are free from then on.
      for (const slot of slots[i]) slot.until = Math.min(slot.until ?? Infinity, lease.expiresAt)
      slots[i] = []
      held[i] = undefined
    }
    return held[i]
  }
  for (const op of ops) {
    switch (op.kind) {
      case 'wait':
        now += op.ms
        break
      case 'take': {
        const lease = live(op.instance)
        const id = nextId++
        const answer = store.lease(
          'k',
          [policy],
          {
            id,
            want: Math.max(op.want, op.need),
            need: op.need,
            leaseMs: op.leaseMs,
            returnId: lease?.id ?? 0,
            returnUnused: lease?.balance ?? 0,
          },
          now,
        )
        if (lease !== undefined) {
          assert.equal(answer.returned, true, 'a live lease is returned')
          // Slots in flight of the returned lease stay charged until they are freed (release or expiry).
          for (const slot of slots[op.instance]) slot.until = Math.min(slot.until ?? Infinity, lease.expiresAt)
          slots[op.instance] = []
        }
        held[op.instance] = undefined
        assert.ok(answer.granted === 0 || answer.granted >= op.need)
        assert.ok(answer.granted <= Math.max(op.want, op.need))
        if (answer.granted > 0) {
          held[op.instance] = { id, balance: answer.granted, granted: answer.granted, expiresAt: answer.expiresAt, inFlight: 0 }
          if (op.need > 0) {
            held[op.instance]!.balance -= op.need
            admitted.push(admit(op.need, op.instance))
          }
        }
        break
      }
      case 'spend': {
        const lease = live(op.instance)
        if (lease !== undefined && lease.balance >= op.cost) {
          lease.balance -= op.cost
          admitted.push(admit(op.cost, op.instance))
        }
        break
      }
      case 'drain': {
        const lease = live(op.instance)
        if (lease !== undefined && lease.balance > 0) {
          admitted.push(admit(lease.balance, op.instance))
          lease.balance = 0
        }
        break
      }
      case 'return': {
        const lease = live(op.instance)
        if (lease === undefined) break
        const ask = { id: 0, want: 0, need: 0, leaseMs: 0, returnId: lease.id, returnUnused: lease.balance }
        assert.equal(store.lease('k', [policy], ask, now).returned, true)
        if (op.twice) assert.equal(store.lease('k', [policy], ask, now).returned, false, 'a second return does nothing')
        for (const slot of slots[op.instance]) slot.until = Math.min(slot.until ?? Infinity, lease.expiresAt)
        slots[op.instance] = []
        held[op.instance] = undefined
        break
      }
      case 'crash':
        if (live(op.instance) !== undefined) {
          for (const slot of slots[op.instance]) slot.until = Math.min(slot.until ?? Infinity, held[op.instance]!.expiresAt)
          slots[op.instance] = []
        }
        held[op.instance] = undefined
        break
      case 'exact': {
        const answer = store.lease('k', [policy], { id: 0, want: 0, need: op.cost, leaseMs: 0, returnId: 0, returnUnused: 0 }, now)
        if (op.cost > 0 && answer.allowed) admitted.push({ at: now, units: op.cost, until: now + policy.periodMs })
        assert.equal(answer.granted, op.cost > 0 && answer.allowed ? op.cost : 0)
        break
      }
      case 'release': {
        // Concurrency: a request admitted from the lease is done; its slot serves the lease again.
        const lease = live(op.instance)
        const slot = slots[op.instance].find((s) => s.until! > now)
        if (policy.algorithm !== 'concurrency' || lease === undefined || slot === undefined) break
        slot.until = now
        slots[op.instance].splice(slots[op.instance].indexOf(slot), 1)
        lease.balance += slot.units
        break
      }
    }
  }
  return admitted

  function admit(units: number, instance: number): Admission {
    // A slot is in flight until released, or until its lease ends at the latest.
    const admission: Admission = { at: now, units, until: held[instance]!.expiresAt }
    if (policy.algorithm === 'concurrency') slots[instance].push(admission)
    return admission
  }
}

/** Asserts the algorithm's guarantee over what was admitted. */
function assertGuarantee(policy: Policy, admitted: Admission[]): void {
  const { algorithm, limit, periodMs, burst } = policy
  if (algorithm === 'fixed-window') {
    const perWindow = new Map<number, number>()
    for (const a of admitted) perWindow.set(Math.floor(a.at / periodMs), (perWindow.get(Math.floor(a.at / periodMs)) ?? 0) + a.units)
    for (const [window, units] of perWindow) assert.ok(units <= limit, `window ${window}: ${units} > ${limit}`)
  } else if (algorithm === 'sliding-window') {
    // At every admission, the weighted estimate of what was admitted (in request-ms) stays within limit.
    for (const a of admitted) {
      const start = Math.floor(a.at / periodMs) * periodMs
      let current = 0
      let previous = 0
      for (const b of admitted) {
        if (b.at > a.at) continue
        if (b.at >= start) current += b.units
        else if (b.at >= start - periodMs) previous += b.units
      }
      const used = previous * (periodMs - (a.at - start)) + current * periodMs
      assert.ok(used <= limit * periodMs, `at ${a.at - START}: estimate ${used / periodMs} > ${limit}`)
    }
  } else if (algorithm === 'concurrency') {
    for (const a of admitted) {
      let inFlight = 0
      for (const b of admitted) if (b.at <= a.at && (b.until === undefined || b.until > a.at)) inFlight += b.units
      assert.ok(inFlight <= limit, `at ${a.at - START}: ${inFlight} in flight > ${limit}`)
    }
  } else {
    // token-bucket, gcra: over any [a, b], admitted ≤ burst + (b − a) × limit / periodMs.
    const sorted = [...admitted].sort((x, y) => x.at - y.at)
    for (let i = 0; i < sorted.length; i++) {
      let units = 0
      for (let j = i; j < sorted.length; j++) {
        units += sorted[j].units
        const span = sorted[j].at - sorted[i].at
        assert.ok(
          units * periodMs <= burst * periodMs + span * limit,
          `${units} units in ${span} ms > ${burst} + ${span} × ${limit}/${periodMs}`,
        )
      }
    }
  }
}

const LEASED: AlgorithmName[] = ['fixed-window', 'sliding-window', 'token-bucket', 'gcra', 'concurrency']

describe('leaseKey: the sum of what all instances admit never breaks the algorithm’s guarantee', () => {
  for (const algorithm of LEASED) {
    it(`${algorithm}: ${INSTANCES} instances taking, spending, returning, losing leases, and exact decisions`, () => {
      fc.assert(
        fc.property(
          fc.integer({ min: 1, max: 12 }),
          fc.integer({ min: 1, max: 12 }),
          fc.constantFrom(100, 1000, 3000),
          fc.integer({ min: 0, max: 5000 }),
          fc.integer({ min: 1, max: 12 }).chain((limit) => arbOps(limit)),
          (limit, burst, periodMs, offset, ops) => {
            const policy = createPolicy({ algorithm, limit, period: periodMs, burst, sync: 'lease' })
            assertGuarantee(policy, run(policy, ops, START + offset))
          },
        ),
        { numRuns: 1000 },
      )
    })
  }
})

describe('leaseKey: grants', () => {
  const policy = createPolicy({ algorithm: 'fixed-window', limit: 100, period: '1s', sync: 'lease' })
  const ask = (id: number, want: number, need = 1): LeaseAsk => ({ id, want, need, leaseMs: 60_000, returnId: 0, returnUnused: 0 })

  it('grants what is wanted within a fair share, and a lease ends by the window’s end', () => {
    const store = new LeaseModelStore()
    const first = store.lease('k', [policy], ask(1, 80), START + 250)
    assert.equal(first.granted, 80) // alone: the whole capacity is its share
    assert.equal(first.expiresAt, START + 1000)
    const second = store.lease('k', [policy], ask(2, 80), START + 300)
    assert.equal(second.granted, 20) // what is left
    const third = store.lease('k', [policy], ask(3, 5), START + 300)
    assert.deepEqual([third.granted, third.allowed, third.results[0].retryAfterMs], [0, false, 700])
  })

  it('caps a newcomer at capacity / (holders + 1), and refunds a return once', () => {
    const store = new LeaseModelStore()
    store.lease('k', [policy], ask(1, 10), START)
    store.lease('k', [policy], ask(2, 10), START)
    assert.equal(store.lease('k', [policy], ask(3, 90), START).granted, 33)
    const back = { id: 0, want: 0, need: 0, leaseMs: 0, returnId: 3, returnUnused: 33 }
    assert.equal(store.lease('k', [policy], back, START).returned, true)
    assert.equal(store.lease('k', [policy], back, START).returned, false)
    assert.equal(store.lease('k', [policy], { ...ask(0, 0), need: 0 }, START).results[0].remaining, 80)
  })

  it('keeps at most MAX_LEASES leases per key, then decides exactly', () => {
    const store = new LeaseModelStore()
    const wide = createPolicy({ algorithm: 'fixed-window', limit: 10_000, period: '1m', sync: 'lease' })
    for (let id = 1; id <= MAX_LEASES; id++) assert.ok(store.lease('k', [wide], ask(id, 2), START).expiresAt > 0)
    const over = store.lease('k', [wide], ask(MAX_LEASES + 1, 50, 3), START)
    assert.deepEqual([over.granted, over.expiresAt, over.allowed], [3, 0, true])
  })

  it('token-bucket: a live lease keeps the bucket below burst − held, so a lost lease is never refilled early', () => {
    const bucket = createPolicy({ algorithm: 'token-bucket', limit: 10, period: '1s', sync: 'lease' })
    const store = new LeaseModelStore()
    assert.equal(store.lease('k', [bucket], ask(1, 10, 0), START).granted, 10)
    // Ten seconds later the bucket has refilled, but only up to burst − 10 = 0 while the lease lives.
    assert.equal(store.lease('k', [bucket], { ...ask(0, 0), leaseMs: 0 }, START + 10_000).results[0].remaining, 0)
  })

  it('gcra: a lease lost by its instance is charged at its expiry, even when the key is read much later', () => {
    const cell = createPolicy({ algorithm: 'gcra', limit: 1, period: 100, burst: 3, sync: 'lease' })
    const store = new LeaseModelStore()
    assert.equal(store.lease('k', [cell], { ...ask(1, 3, 3), leaseMs: 1 }, START).granted, 3)
    // Spent, never returned: charged at its expiry (START + 1), so 50 ms later half a unit has come back, not the burst.
    const exact = store.lease('k', [cell], { ...ask(0, 0), need: 1 }, START + 50)
    assert.deepEqual([exact.allowed, exact.results[0].retryAfterMs], [false, 51])
  })

  it('gcra: the state outlives the leases on it, so an expiry is charged to the state as it was then', () => {
    const cell = createPolicy({ algorithm: 'gcra', limit: 8, period: '1s', sync: 'lease' })
    const store = new LeaseModelStore()
    assert.equal(store.lease('k', [cell], { ...ask(0, 0), need: 6 }, START).allowed, true)
    assert.equal(store.lease('k', [cell], { ...ask(1, 2, 2), leaseMs: 300 }, START).granted, 2)
    // 750 ms later: 8 admitted at START, so at most 8 + 750 × 8 / 1000 = 14 in all, 6 more.
    const admitted = Array.from({ length: 7 }, () => store.lease('k', [cell], { ...ask(0, 0), need: 1 }, START + 750).allowed)
    assert.deepEqual(admitted, [true, true, true, true, true, true, false])
  })
})
