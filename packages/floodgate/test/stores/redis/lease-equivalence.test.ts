// One truth for leases too: random lease traces (takes, renewals, returns twice, exact decisions,
// refunds, expiries) through core/lease.ts, RedisStore.lease (lease.lua) and MemoryStore.lease
// must answer identically at every step.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import { createPolicy, type AlgorithmName, type Policy } from '../../../src/core/policy.js'
import { MemoryStore } from '../../../src/stores/memory/memory-store.js'
import type { LeaseRequest } from '../../../src/stores/store.js'
import { leaseScript } from '../../../src/stores/redis/scripts.js'
import { LeaseModelStore } from '../../core/lease-model.js'
import { useRedisStore } from '../../support/redis-store.js'

/**
 * SHA1 of the lease script (prelude, algorithm twins, record.lua, lease.lua, lease-runner.lua). A
 * failure means a .lua file changed: check the change is meant (and its twin with it), then update it.
 */
const PINNED_LEASE_SHA = '3eb73a11ed1440162f094216b49d2aa04d0804fc'

const redis = useRedisStore()

test('the lease script is the one pinned', () => {
  assert.equal(leaseScript().sha, PINNED_LEASE_SHA, 'a .lua file changed: review it, then update PINNED_LEASE_SHA')
})

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
  kind: fc.constantFrom('take', 'take', 'renew', 'return', 'exact'),
  id: fc.integer({ min: 1, max: 6 }),
  returnId: fc.integer({ min: 1, max: 6 }),
  want: fc.integer({ min: 0, max: 14 }),
  need: fc.integer({ min: -2, max: 3 }),
  unused: fc.integer({ min: 0, max: 14 }),
  leaseMs: fc.integer({ min: 1, max: 3_000 }),
  advance: fc.oneof(
    { arbitrary: fc.constant(0), weight: 2 },
    { arbitrary: fc.integer({ min: 1, max: 60 }), weight: 5 },
    { arbitrary: fc.integer({ min: 61, max: 8_000 }), weight: 2 },
  ),
  sameTick: fc.boolean(),
})

test('random lease traces answer identically in TypeScript, in Redis (lease.lua) and in MemoryStore', async () => {
  // Ahead of the server clock, so Redis never expires a record the reference still holds.
  const start = Date.now() + 86_400_000
  await fc.assert(
    fc.asyncProperty(
      fc.tuple(policyArbitrary('p0'), policyArbitrary('p1'), policyArbitrary('p2')),
      fc.array(stepArbitrary, { minLength: 1, maxLength: 50 }),
      async (pool, steps) => {
        await redis.client.flushdb()
        const reference = new LeaseModelStore()
        const memory = new MemoryStore()
        let now = start
        const ticks: LeaseRequest[][] = []
        for (const step of steps) {
          now += step.advance
          const policies: Policy[] = step.policies.map((i) => pool[i])
          const positive = Math.max(0, step.need)
          const request: LeaseRequest = {
            key: step.key,
            policies,
            now,
            leaseMs: step.leaseMs,
            want: 0,
            need: positive,
            id: 0,
            returnId: 0,
            returnUnused: 0,
          }
          if (step.kind === 'take') Object.assign(request, { id: step.id, want: Math.max(positive, step.want) })
          else if (step.kind === 'renew')
            Object.assign(request, { id: step.id, want: Math.max(positive, step.want), returnId: step.returnId, returnUnused: step.unused })
          else if (step.kind === 'return') Object.assign(request, { returnId: step.returnId, returnUnused: step.unused, need: 0 })
          else request.need = step.need
          if (step.sameTick && ticks.length > 0) ticks[ticks.length - 1].push(request)
          else ticks.push([request])
        }
        for (const tick of ticks) {
          const fromRedis = await Promise.all(tick.map((request) => redis.store.lease([request]).then(([response]) => response)))
          for (let i = 0; i < tick.length; i++) {
            const request = tick[i]
            const where = `request ${JSON.stringify({ ...request, policies: request.policies.map((p) => p.name) })}`
            const expected = reference.lease(request.key, request.policies, request, request.now!)
            const { granted, expiresAt, returned, allowed, results } = expected
            assert.deepEqual(fromRedis[i], { granted, expiresAt, returned, allowed, results, now: request.now }, where)
            assert.deepEqual((await memory.lease([request]))[0], fromRedis[i], `MemoryStore, ${where}`)
          }
        }
      },
    ),
    { numRuns: 400 },
  )
})
