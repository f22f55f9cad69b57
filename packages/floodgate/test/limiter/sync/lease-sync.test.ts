// LeaseSync and AutoSync against a model: several instances on one MemoryStore, random demand, time,
// sweeps, cancelled callers and closes; what they admit never breaks the algorithm's guarantee.

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import { createPolicy, type AlgorithmName, type Policy } from '../../../src/core/policy.js'
import { MemoryStore } from '../../../src/stores/memory/memory-store.js'
import { LeaseSync, type LeaseSource } from '../../../src/limiter/sync/lease-sync.js'
import { AutoSync } from '../../../src/limiter/sync/auto-sync.js'

const START = 1_700_000_000_000
const settle = () => new Promise<void>((resolve) => setImmediate(resolve))

type Op =
  | { kind: 'wait'; ms: number }
  | { kind: 'burst'; instance: number; count: number; cost: number; cancelEvery: number }
  | { kind: 'sweep'; instance: number }
  | { kind: 'close'; instance: number }

const INSTANCES = 3

const arbOp: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('wait' as const),
      ms: fc.oneof(fc.integer({ min: 0, max: 50 }), fc.integer({ min: 0, max: 1500 })),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('burst' as const),
      instance: fc.integer({ min: 0, max: INSTANCES - 1 }),
      count: fc.integer({ min: 1, max: 40 }),
      cost: fc.integer({ min: 1, max: 2 }),
      cancelEvery: fc.integer({ min: 0, max: 7 }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('sweep' as const), instance: fc.integer({ min: 0, max: INSTANCES - 1 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('close' as const), instance: fc.integer({ min: 0, max: INSTANCES - 1 }) }) },
)

interface Admission {
  at: number
  units: number
}

/** Runs the ops through INSTANCES limiters' sync engines on one store; returns what was admitted, by source. */
async function run(
  policy: Policy,
  ops: Op[],
  mode: 'lease' | 'auto',
): Promise<{ admitted: Admission[]; sources: Map<LeaseSource, number> }> {
  let now = START
  const clock = () => now
  const store = new MemoryStore({ clock })
  const make = () => {
    const leases = new LeaseSync({ store, clock })
    return { leases, auto: new AutoSync({ store, leases, clock }) }
  }
  const instances = Array.from({ length: INSTANCES }, make)
  const admitted: Admission[] = []
  const sources = new Map<LeaseSource, number>()
  const policies = [policy]
  for (const op of ops) {
    if (op.kind === 'wait') now += op.ms
    else if (op.kind === 'sweep') await instances[op.instance].leases.sweep()
    else if (op.kind === 'close') {
      await instances[op.instance].leases.close()
      instances[op.instance] = make()
    } else {
      const { leases, auto } = instances[op.instance]
      for (let i = 0; i < op.count; i++) {
        const engine = mode === 'lease' ? leases : auto
        // A cancelled caller was answered by its timeout: whatever comes later must not count.
        let cancelled = false
        const cancel = engine.decide('k', policies, op.cost, (error, response, source) => {
          assert.equal(error, null)
          if (cancelled) assert.fail('a cancelled caller is not answered')
          if (response!.allowed) admitted.push({ at: now, units: op.cost })
          sources.set(source!, (sources.get(source!) ?? 0) + 1)
        })
        if (op.cancelEvery > 0 && i % op.cancelEvery === 0) {
          cancelled = true
          cancel()
        }
      }
    }
    await settle()
  }
  return { admitted, sources }
}

function assertWithinLimit(policy: Policy, admitted: Admission[]): void {
  if (policy.algorithm === 'fixed-window') {
    const perWindow = new Map<number, number>()
    for (const a of admitted) {
      const window = Math.floor(a.at / policy.periodMs)
      perWindow.set(window, (perWindow.get(window) ?? 0) + a.units)
    }
    for (const [window, units] of perWindow) assert.ok(units <= policy.limit, `window ${window}: ${units} > ${policy.limit}`)
    return
  }
  const sorted = [...admitted].sort((x, y) => x.at - y.at)
  for (let i = 0; i < sorted.length; i++) {
    let units = 0
    for (let j = i; j < sorted.length; j++) {
      units += sorted[j].units
      const span = sorted[j].at - sorted[i].at
      assert.ok(units * policy.periodMs <= policy.burst * policy.periodMs + span * policy.limit, `${units} units in ${span} ms`)
    }
  }
}

const ALGORITHMS: AlgorithmName[] = ['fixed-window', 'token-bucket', 'gcra']

describe('LeaseSync and AutoSync: instances on one store never admit more than the limit', () => {
  for (const mode of ['lease', 'auto'] as const) {
    for (const algorithm of ALGORITHMS) {
      it(`${mode}, ${algorithm}`, async () => {
        await fc.assert(
          fc.asyncProperty(fc.integer({ min: 1, max: 40 }), fc.array(arbOp, { maxLength: 40 }), async (limit, ops) => {
            const policy = createPolicy({
              algorithm,
              limit,
              period: '1s',
              sync: mode,
              leaseMs: '300ms',
              ...(mode === 'auto' ? { hotRate: 20 } : {}),
            })
            const { admitted } = await run(policy, ops, mode)
            assertWithinLimit(policy, admitted)
          }),
          { numRuns: 150 },
        )
      })
    }
  }
})

describe('LeaseSync: sizing, returns and sources', () => {
  it('a hot instance takes blocks that grow with demand; a quiet one gives its lease back at the sweep', async () => {
    let now = START
    const clock = () => now
    const store = new MemoryStore({ clock })
    const policy = createPolicy({ algorithm: 'fixed-window', limit: 10_000, period: '1m', sync: 'lease', leaseMax: 500 })
    const leases = new LeaseSync({ store, clock })
    const sources: LeaseSource[] = []
    let calls = 0
    const lease = store.lease.bind(store)
    store.lease = (batch) => {
      calls++
      return lease(batch)
    }
    for (let tick = 0; tick < 200; tick++) {
      for (let i = 0; i < 10; i++) leases.decide('k', [policy], 1, (_, __, source) => sources.push(source!))
      await settle()
      now += 1
    }
    assert.equal(sources.length, 2000)
    // 10 units/ms × 1 s of lease time: blocks reach leaseMax, so a store call per 500 decisions.
    assert.ok(calls < 40, `${calls} store calls for 2000 decisions`)
    assert.ok(sources.filter((s) => s === 'lease').length > 1900)
    assert.ok(leases.held('k', [policy]) > 0)
    now += 250 // a quarter of the lease time without a decision: quiet
    await leases.sweep()
    assert.equal(leases.held('k', [policy]), 0)
    const peek = await store.lease([{ key: 'k', policies: [policy], id: 0, want: 0, need: 0, leaseMs: 0, returnId: 0, returnUnused: 0 }])
    assert.equal(peek[0].results[0].remaining, 10_000 - 2000, 'every unused unit came back')
  })

  it('an in-process answer holds one result per policy of its own set, after a longer set was answered', async () => {
    const clock = () => START
    const store = new MemoryStore({ clock })
    const minute = createPolicy({ name: 'minute', algorithm: 'fixed-window', limit: 1000, period: '1m', sync: 'lease' })
    const hour = createPolicy({ name: 'hour', algorithm: 'fixed-window', limit: 5000, period: '1h', sync: 'lease' })
    const leases = new LeaseSync({ store, clock })
    const answer = async (key: string, policies: Policy[]) => {
      let got: { results: number[]; source: LeaseSource | undefined } | undefined
      leases.decide(key, policies, 1, (_, response, source) => {
        got = { results: response!.results.map((result) => result.remaining), source }
      })
      await settle()
      return got!
    }
    // Twice each: the first takes the lease from the store, the second is answered from it.
    for (let i = 0; i < 2; i++) await answer('both', [minute, hour])
    const both = await answer('both', [minute, hour])
    assert.equal(both.source, 'lease')
    assert.equal(both.results.length, 2)
    for (let i = 0; i < 2; i++) await answer('one', [minute])
    const one = await answer('one', [minute])
    assert.equal(one.source, 'lease')
    assert.equal(one.results.length, 1, 'no result of the two-policy set stays behind')
  })

  it("an in-process answer's now is the epoch clock at the decision, though it reads only the monotonic one", async () => {
    // The monotonic clock starts near 0, the epoch clock at START; the epoch clock drifts 3 ms ahead
    // and the next sweep catches up with it.
    let mono = 5.25
    let drift = 0
    const clock = () => mono
    const epochClock = () => Math.floor(START + mono + drift)
    const store = new MemoryStore({ clock: epochClock })
    const policy = createPolicy({ algorithm: 'fixed-window', limit: 10_000, period: '1m', sync: 'lease' })
    const leases = new LeaseSync({ store, clock, epochClock })
    const answer = async () => {
      let got: { now: number; source: LeaseSource | undefined } | undefined
      leases.decide('k', [policy], 1, (_, response, source) => {
        got = { now: response!.now, source }
      })
      await settle()
      return got!
    }
    for (let i = 0; i < 3; i++) await answer()
    mono += 40.5
    const local = await answer()
    assert.equal(local.source, 'lease')
    assert.equal(local.now, epochClock())
    drift = 3
    await leases.sweep()
    mono += 10
    const later = await answer()
    assert.equal(later.source, 'lease')
    assert.equal(later.now, epochClock())
  })

  it("a decision made in a waiter's callback queues behind the other waiters, and the key keeps one store call", async () => {
    let now = START
    const clock = () => now
    const store = new MemoryStore({ clock })
    let calls = 0
    const counting = {
      lease: (batch: Parameters<MemoryStore['lease']>[0]) => {
        calls++
        return store.lease(batch)
      },
    }
    const leases = new LeaseSync({ store: counting as unknown as MemoryStore, clock })
    const policy = createPolicy({ algorithm: 'fixed-window', limit: 1000, period: '1h', sync: 'lease', leaseMax: 5 })
    const order: string[] = []
    const ask = (name: string, then?: () => void) =>
      leases.decide('k', [policy], 1, (error, response, source) => {
        assert.equal(error, null)
        assert.equal(response!.allowed, true)
        order.push(`${name}:${source}`)
        then?.()
      })
    // Decided exactly, then a lease of leaseMax (5) whose first unit is the second decision; four more spend it.
    ask('w1')
    await settle()
    now += 20
    for (let i = 2; i <= 6; i++) {
      ask(`w${i}`)
      await settle()
    }
    assert.equal(leases.held('k', [policy]), 0)
    order.length = 0
    calls = 0
    // Three callers wait for the next lease; the first one's callback asks again at once.
    ask('a', () => ask('d'))
    ask('b')
    ask('c')
    await settle()
    await settle()
    assert.deepEqual(order, ['a:lease', 'b:lease', 'c:lease', 'd:lease'])
    assert.equal(calls, 1, 'one lease call served all four')
    await leases.close()
  })

  it('a key asked every 20 ms gets a lease covering it from its second request; the sweep renews it while in use', async () => {
    let now = START
    const clock = () => now
    const store = new MemoryStore({ clock })
    // Store calls a caller waited for (a request in hand), and renewals (none in hand, a lease taken).
    let waited = 0
    let renewals = 0
    const counting = {
      lease: (batch: Parameters<MemoryStore['lease']>[0]) => {
        for (const request of batch) {
          if (request.need > 0) waited++
          else if (request.id !== 0) renewals++
        }
        return store.lease(batch)
      },
    }
    const leases = new LeaseSync({ store: counting as unknown as MemoryStore, clock })
    const policy = createPolicy({ algorithm: 'fixed-window', limit: 100_000, period: '1h', sync: 'lease', leaseMs: '1s' })
    const sources: LeaseSource[] = []
    const ask = async () => {
      leases.decide('k', [policy], 1, (error, response, source) => {
        assert.equal(error, null)
        assert.equal(response!.allowed, true)
        sources.push(source!)
      })
      await settle()
    }
    await ask() // the first request: no demand known yet, decided exactly
    now += 20
    await ask() // the second: a lease for what follows (the decision is the lease's first unit)
    assert.deepEqual(sources, ['store', 'lease'])
    assert.ok(leases.held('k', [policy]) >= 20, `held ${leases.held('k', [policy])}`)
    // Every 20 ms for 2.5 s (well past the first lease's expiry at 1.02 s), sweeping every 100 ms as the timer does.
    for (let t = 40; t <= 2_500; t += 20) {
      now = START + t
      await ask()
      if (t % 100 === 0) {
        await leases.sweep()
        await settle()
      }
    }
    // 126 decisions: the first two waited, then a lease that ran short (demand was read low at
    // first) may cost one more wait; the expiries at ~1 s and ~2 s were renewed by the sweep.
    assert.ok(waited <= 4, `${waited} of ${sources.length} decisions waited for the store`)
    assert.ok(renewals >= 2, `${renewals} renewals`)
    assert.ok(leases.held('k', [policy]) > 0)
    // Quiet for a quarter of the lease time: the sweep gives the rest back.
    now += 300
    await leases.sweep()
    assert.equal(leases.held('k', [policy]), 0)
    const admitted = sources.length
    const [peek] = await store.lease([{ key: 'k', policies: [policy], id: 0, want: 0, need: 0, leaseMs: 0, returnId: 0, returnUnused: 0 }])
    assert.equal(peek.results[0].remaining, 100_000 - admitted, 'every unused unit came back')
    await leases.close()
  })

  it('close() gives back every lease; a store failure reaches the waiting callers, and held units keep serving', async () => {
    let now = START
    const clock = () => now
    const store = new MemoryStore({ clock })
    const policy = createPolicy({ algorithm: 'token-bucket', limit: 100, period: '1s', sync: 'lease', leaseMax: 10 })
    const leases = new LeaseSync({ store, clock })
    for (let i = 0; i < 30; i++) leases.decide('k', [policy], 1, () => {})
    await settle()
    const held = leases.held('k', [policy])
    assert.ok(held > 0)
    // The store goes away: the held units still serve, then the next call fails.
    store.lease = () => Promise.reject(new Error('down'))
    const outcomes: string[] = []
    for (let i = 0; i < held + 1; i++)
      leases.decide('k', [policy], 1, (error, _, source) => outcomes.push(error === null ? source! : 'error'))
    await settle()
    assert.deepEqual(outcomes, [...Array(held).fill('lease'), 'error'])
    now += 10
    const fresh = new MemoryStore({ clock })
    const other = new LeaseSync({ store: fresh, clock })
    for (let i = 0; i < 5; i++) other.decide('k', [policy], 1, () => {})
    await settle()
    assert.ok(other.held('k', [policy]) > 0)
    await other.close()
    const peek = await fresh.lease([{ key: 'k', policies: [policy], id: 0, want: 0, need: 0, leaseMs: 0, returnId: 0, returnUnused: 0 }])
    assert.equal(peek[0].results[0].remaining, 95)
  })

  it('auto: a cold key is decided in the store, a hot one from leases, and it cools back', async () => {
    let now = START
    const clock = () => now
    const store = new MemoryStore({ clock })
    const policy = createPolicy({ algorithm: 'gcra', limit: 1000, period: '1s', sync: 'auto', hotRate: 50 })
    const leases = new LeaseSync({ store, clock })
    const auto = new AutoSync({ store, leases, clock })
    const decide = async () => {
      let source: LeaseSource | undefined
      auto.decide('k', [policy], 1, (_, __, s) => (source = s))
      await settle()
      return source
    }
    now += 100
    assert.equal(await decide(), 'store')
    for (let i = 0; i < 100; i++) {
      now += 5 // 200 decisions a second
      await decide()
    }
    assert.equal(auto.isHot('k', [policy]), true)
    assert.equal(await decide(), 'lease')
    now += 5000
    assert.equal(await decide(), 'store')
    assert.equal(auto.isHot('k', [policy]), false)
    await settle()
    assert.equal(leases.held('k', [policy]), 0)
  })
})
