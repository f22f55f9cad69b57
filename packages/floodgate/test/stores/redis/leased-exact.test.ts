// Exact decisions of keys with live leases (scripts/leased-exact.lua): random traces mixing lease
// calls (lease.lua) and exact calls (runner.lua) on the same keys must answer as the TypeScript
// does: core/lease.ts with `id` 0 while a key's record says leases are live, evaluateKey otherwise.
// So a key moving between `auto`'s two paths loses and doubles no charge, for every leased algorithm.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import { evaluateKey, type PolicyRecord } from '../../../src/core/evaluate.js'
import { leaseKey, type LeaseAsk, type Ledger } from '../../../src/core/lease.js'
import { createPolicy, type AlgorithmName, type Policy } from '../../../src/core/policy.js'
import type { EvaluateResponse, LeaseRequest } from '../../../src/stores/store.js'
import { ledgerKey } from '../../../src/stores/redis/lease-call.js'
import { policyKey } from '../../../src/stores/redis/keys.js'
import { useRedisStore } from '../../support/redis-store.js'

const redis = useRedisStore()

/**
 * Records as a store keeps them (dropped at their ttl), and for each state record whether the call
 * that wrote it left leases live on its ledger: record.lua's 'L' tag.
 */
class Reference {
  private readonly kept = new Map<string, { record: PolicyRecord; expiresAt: number; leased: boolean }>()

  lease(key: string, policies: readonly Policy[], ask: LeaseAsk, now: number) {
    const ids = policies.map((policy) => `${key}:${policy.name}`)
    const records = ids.map((id) => this.read(id, now)?.record)
    const ledgers = ids.map((id) => this.read(`${id}#l`, now)?.record.state as Ledger | undefined)
    const evaluation = leaseKey(records, ledgers, now, ask, policies)
    this.keep(ids, evaluation.records, evaluation.ttlMs, now)
    return evaluation
  }

  evaluate(key: string, policies: readonly Policy[], cost: number, now: number): EvaluateResponse {
    const ids = policies.map((policy) => `${key}:${policy.name}`)
    if (ids.some((id) => this.read(id, now)?.leased === true)) {
      const lease = this.lease(key, policies, { id: 0, want: 0, need: cost, leaseMs: 0, returnId: 0, returnUnused: 0 }, now)
      return { allowed: lease.allowed, results: lease.results, now }
    }
    const evaluation = evaluateKey(
      ids.map((id) => this.read(id, now)?.record),
      now,
      cost,
      policies,
    )
    ids.forEach((id, i) => this.kept.set(id, { record: evaluation.records[i], expiresAt: now + evaluation.ttlMs[i], leased: false }))
    return { allowed: evaluation.allowed, results: evaluation.results, now }
  }

  private read(id: string, now: number) {
    const entry = this.kept.get(id)
    return entry !== undefined && now < entry.expiresAt ? entry : undefined
  }

  private keep(ids: string[], records: PolicyRecord[], ttlMs: number[], now: number): void {
    const count = ids.length
    ids.forEach((id, i) => {
      const leased = records[count + i].state !== undefined
      this.kept.set(id, { record: records[i], expiresAt: now + ttlMs[i], leased })
      this.kept.set(`${id}#l`, { record: records[count + i], expiresAt: now + ttlMs[count + i], leased: false })
    })
  }
}

const LEASED: AlgorithmName[] = ['fixed-window', 'sliding-window', 'token-bucket', 'gcra', 'concurrency']

const policyArbitrary = (name: string) =>
  fc
    .record({
      algorithm: fc.constantFrom(...LEASED),
      limit: fc.integer({ min: 1, max: 12 }),
      period: fc.oneof(fc.integer({ min: 1, max: 50 }), fc.integer({ min: 51, max: 5_000 })),
      burst: fc.integer({ min: 1, max: 12 }),
    })
    .map((options) => createPolicy({ name, sync: 'lease', ...options }))

const stepArbitrary = fc.record({
  key: fc.constantFrom('alice', 'x{y}:%'),
  policies: fc.uniqueArray(fc.integer({ min: 0, max: 2 }), { minLength: 1, maxLength: 3 }),
  kind: fc.constantFrom('take', 'renew', 'return', 'exact', 'exact', 'exact'),
  id: fc.integer({ min: 1, max: 4 }),
  returnId: fc.integer({ min: 1, max: 4 }),
  want: fc.integer({ min: 0, max: 14 }),
  cost: fc.integer({ min: -2, max: 3 }),
  unused: fc.integer({ min: 0, max: 14 }),
  leaseMs: fc.integer({ min: 1, max: 3_000 }),
  advance: fc.oneof(
    { arbitrary: fc.constant(0), weight: 2 },
    { arbitrary: fc.integer({ min: 1, max: 60 }), weight: 5 },
    { arbitrary: fc.integer({ min: 61, max: 8_000 }), weight: 2 },
  ),
  sameTick: fc.boolean(),
})

type Step = { kind: 'lease'; request: LeaseRequest } | { kind: 'exact'; key: string; policies: Policy[]; cost: number; now: number }

test('lease calls and exact calls mixed on one key answer as core/lease.ts (id 0 while leases are live) and evaluateKey', async () => {
  // Ahead of the server clock, so Redis never expires a record the reference still holds.
  const start = Date.now() + 86_400_000
  await fc.assert(
    fc.asyncProperty(
      fc.tuple(policyArbitrary('p0'), policyArbitrary('p1'), policyArbitrary('p2')),
      fc.array(stepArbitrary, { minLength: 1, maxLength: 50 }),
      async (pool, steps) => {
        await redis.client.flushdb()
        const reference = new Reference()
        let now = start
        const ticks: Step[][] = []
        for (const step of steps) {
          now += step.advance
          const policies: Policy[] = step.policies.map((i) => pool[i])
          let made: Step
          if (step.kind === 'exact') made = { kind: 'exact', key: step.key, policies, cost: step.cost, now }
          else {
            const need = Math.max(0, step.cost)
            const request: LeaseRequest = {
              key: step.key,
              policies,
              now,
              leaseMs: step.leaseMs,
              want: 0,
              need,
              id: 0,
              returnId: 0,
              returnUnused: 0,
            }
            if (step.kind === 'take') Object.assign(request, { id: step.id, want: Math.max(need, step.want) })
            else if (step.kind === 'renew')
              Object.assign(request, { id: step.id, want: Math.max(need, step.want), returnId: step.returnId, returnUnused: step.unused })
            else Object.assign(request, { returnId: step.returnId, returnUnused: step.unused, need: 0 })
            made = { kind: 'lease', request }
          }
          // A tick is one kind of call: exact requests of a tick share one runner call.
          const last = ticks[ticks.length - 1]
          if (step.sameTick && last !== undefined && last[0].kind === made.kind) last.push(made)
          else ticks.push([made])
        }
        for (const tick of ticks) {
          const answers = await Promise.all(
            tick.map((step) =>
              step.kind === 'lease'
                ? redis.store.lease([step.request]).then(([response]) => response as unknown)
                : redis.store
                    .evaluate([{ key: step.key, policies: step.policies, cost: step.cost, now: step.now }])
                    .then(([r]) => r as unknown),
            ),
          )
          tick.forEach((step, i) => {
            const name = (policies: readonly Policy[]) => policies.map((p) => `${p.name}:${p.algorithm}`)
            if (step.kind === 'lease') {
              const request = step.request
              const where = `lease ${JSON.stringify({ ...request, policies: name(request.policies) })}`
              const { granted, expiresAt, returned, allowed, results } = reference.lease(
                request.key,
                request.policies,
                request,
                request.now!,
              )
              assert.deepEqual(answers[i], { granted, expiresAt, returned, allowed, results, now: request.now }, where)
            } else {
              const where = `exact ${JSON.stringify({ ...step, policies: name(step.policies) })}`
              assert.deepEqual(answers[i], reference.evaluate(step.key, step.policies, step.cost, step.now), where)
            }
          })
        }
      },
    ),
    { numRuns: 300 },
  )
})

for (const algorithm of ['token-bucket', 'gcra'] as const) {
  test(`${algorithm}: exact calls count what a live lease holds; the record says 'L' until a call settles the lease`, async () => {
    await redis.client.flushdb()
    const policy = createPolicy({ name: algorithm, algorithm, limit: 10, period: 1000, burst: 10, sync: 'lease' })
    const start = Date.now() + 86_400_000
    const prefix = redis.store.prefix
    const tag = async () => (await redis.client.getBuffer(policyKey(prefix, 'k', policy)))?.subarray(0, 1).toString()
    const exact = async (now: number, count: number) => {
      let admitted = 0
      for (let i = 0; i < count; i++)
        if ((await redis.store.evaluate([{ key: 'k', policies: [policy], cost: 1, now }]))[0].allowed) admitted++
      return admitted
    }
    const [granted] = await redis.store.lease([
      { key: 'k', policies: [policy], now: start, leaseMs: 10_000, want: 4, need: 1, id: 7, returnId: 0, returnUnused: 0 },
    ])
    assert.equal(granted.granted, 4)
    assert.equal(await tag(), 'L')
    // 4 units out on the lease: 6 left now (a gcra reservation is not in its state: a plain step would pass 10).
    assert.equal(await exact(start, 12), 6)
    // 0.9 s refills 9, but a bucket refills only up to burst - held while the lease lives (a plain step: 9).
    assert.equal(await exact(start + 900, 12), 6)
    assert.equal(await tag(), 'L')
    // Past the lease's end, the next exact call ends it in the state and writes the usual record.
    await exact(start + 20_000, 1)
    assert.equal(await tag(), 'S')
    assert.equal(await redis.client.exists(ledgerKey(prefix, 'k', policy)), 0)
  })
}
