// One merge, two executors: random traces of merges (with replays of the same origin and seq) and
// decisions through RedisStore (merge-runner.lua + merge.lua + record.lua) and MemoryStore.merge must
// give the same records and applied flags at every step.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import { createPolicy, type AlgorithmName, type Policy, type PolicyOptions } from '../../../src/core/policy.js'
import { ALGORITHM_BY_NAME } from '../../../src/core/algorithms/index.js'
import { MERGE_BY_NAME } from '../../../src/core/merge.js'
import type { PolicyRecord } from '../../../src/core/evaluate.js'
import { MemoryStore } from '../../../src/stores/memory/memory-store.js'
import type { MergeRequest } from '../../../src/stores/store.js'
import { mergerScript } from '../../../src/stores/redis/merger-script.js'
import { policyKey } from '../../../src/stores/redis/keys.js'
import { useRedisStore } from '../../support/redis-store.js'

/**
 * SHA1 of the merge script (prelude, algorithm twins, record.lua, merge.lua, merge-runner.lua). A
 * failure means a .lua file changed: check the change is meant (and its twin with it), then update it.
 */
const PINNED_MERGER_SHA = '213e1cf56503021e2c5ecd4c065882e534044508'

const MERGEABLE = Object.keys(MERGE_BY_NAME) as AlgorithmName[]

const redis = useRedisStore()

const policyOptions = (name: string): fc.Arbitrary<PolicyOptions> =>
  fc.record({
    name: fc.constant(name),
    algorithm: fc.constantFrom(...MERGEABLE),
    limit: fc.integer({ min: 1, max: 8 }),
    period: fc.oneof(fc.integer({ min: 1, max: 50 }), fc.integer({ min: 51, max: 5_000 })),
    burst: fc.option(fc.integer({ min: 1, max: 12 }), { nil: undefined }),
    blockMs: fc.option(fc.integer({ min: 1, max: 3_000 }), { nil: undefined, freq: 3 }),
  })

const poolArbitrary = fc.tuple(policyOptions('p0'), policyOptions('p1'), policyOptions('p2'))

const stepArbitrary = fc.record({
  kind: fc.constantFrom('merge', 'merge', 'merge', 'decide', 'replay'),
  key: fc.constantFrom('alice', 'bob', 'x{y}:%'),
  policies: fc.uniqueArray(fc.integer({ min: 0, max: 2 }), { minLength: 1, maxLength: 3 }),
  units: fc.oneof(
    { weight: 6, arbitrary: fc.integer({ min: 1, max: 12 }) },
    { weight: 2, arbitrary: fc.constant(0) },
    { weight: 1, arbitrary: fc.integer({ min: -4, max: -1 }) },
  ),
  origin: fc.constantFrom(undefined, 'east', 'west'),
  advance: fc.oneof(
    { arbitrary: fc.constant(0), weight: 3 },
    { arbitrary: fc.integer({ min: 1, max: 60 }), weight: 5 },
    { arbitrary: fc.integer({ min: 61, max: 8_000 }), weight: 1 },
  ),
  sameCall: fc.boolean(),
})

/**
 * A record as a decision sees it: Redis keeps a record past its ttl (its expiry is padded) where the
 * memory store drops it, and the algorithms promise a state past its ttl steps as no state; so two
 * records agree when they are equal, or when they peek alike now.
 */
function assertSameRecord(fromRedis: PolicyRecord, fromMemory: PolicyRecord, policy: Policy, now: number, where: string): void {
  if (fromRedis.state !== undefined && fromMemory.state !== undefined) return assert.deepEqual(fromRedis, fromMemory, where)
  assert.equal(fromRedis.blockedUntil, fromMemory.blockedUntil, where)
  const peek = (state: number[] | undefined) => {
    const { state: _, ...result } = ALGORITHM_BY_NAME[policy.algorithm].step(state, now, 0, policy)
    return result
  }
  assert.deepEqual(peek(fromRedis.state), peek(fromMemory.state), where)
}

test(`random merge traces give the same records in Redis and in memory (${MERGEABLE.join(', ')})`, async () => {
  // Ahead of the server clock, as equivalence.test.ts: Redis never expires a record the memory store holds.
  const start = Date.now() + 86_400_000
  await fc.assert(
    fc.asyncProperty(poolArbitrary, fc.array(stepArbitrary, { minLength: 1, maxLength: 50 }), async (pool, steps) => {
      await redis.client.flushdb()
      const policies: Policy[] = pool.map((options) => createPolicy(options))
      const memory = new MemoryStore()
      const seqs = new Map<string, number>()
      let now = start
      let previous: MergeRequest | undefined
      // Merges of one call go to Redis as one script call; the memory store runs them in order.
      let call: MergeRequest[] = []
      const send = async (): Promise<void> => {
        if (call.length === 0) return
        const sent = call
        call = []
        const fromRedis = await redis.store.merge(sent)
        const fromMemory = await memory.merge(sent)
        for (let r = 0; r < sent.length; r++) {
          const where = `merge ${r + 1} of ${sent.length} ${JSON.stringify({ ...sent[r], policies: sent[r].policies.map((p) => p.name) })}`
          assert.equal(fromRedis[r].applied, fromMemory[r].applied, `applied, ${where}`)
          assert.equal(fromRedis[r].now, fromMemory[r].now)
          sent[r].policies.forEach((policy, i) => {
            assertSameRecord(fromRedis[r].records[i], fromMemory[r].records[i], policy, sent[r].now!, `${policy.name}, ${where}`)
          })
        }
      }
      for (const step of steps) {
        const set = step.policies.map((i) => policies[i])
        if (step.kind === 'decide') {
          await send()
          now += step.advance
          const request = { key: step.key, policies: set, cost: 1, now }
          const [fromRedis] = await redis.store.evaluate([request])
          assert.deepEqual(fromRedis, (await memory.evaluate([request]))[0])
          previous = undefined
          continue
        }
        let request: MergeRequest
        if (step.kind === 'replay' && previous !== undefined) {
          request = previous // the same origin, seq and now: the answer of the first send was lost
        } else {
          if (!step.sameCall) await send()
          // A call is on one clock reading: only its first request moves the clock.
          if (call.length === 0) now += step.advance
          request = { key: step.key, policies: set, units: step.units, now }
          if (step.origin !== undefined) {
            const seq = (seqs.get(step.origin) ?? 0) + 1
            seqs.set(step.origin, seq)
            request = { ...request, origin: step.origin, seq }
          }
        }
        previous = request
        call.push(request)
      }
      await send()
    }),
    { numRuns: 400 },
  )
})

test('the merge script is the one pinned, and a server that lost it (SCRIPT FLUSH) gets it back', async () => {
  const script = mergerScript()
  assert.equal(script.sha, PINNED_MERGER_SHA, 'a .lua file changed: review it, then update PINNED_MERGER_SHA')
  assert.match(script.source, /^#!lua flags=allow-cross-slot-keys\n/)
  const policies = [createPolicy({ name: 'p', algorithm: 'gcra', limit: 5, period: '1m', sync: 'write-back' })]
  await redis.store.merge([{ key: 'reload', policies, units: 1 }])
  await redis.client.script('FLUSH')
  const [after] = await redis.store.merge([{ key: 'reload', policies, units: 1 }])
  assert.equal(ALGORITHM_BY_NAME.gcra.step(after.records[0].state, after.now, 0, policies[0]).remaining, 3)
})

test('the merge script keeps no origins beside a record: one token per origin holds its seqs (merge-token.test.ts)', async () => {
  await redis.client.flushdb()
  const policies = [createPolicy({ name: 'p', algorithm: 'fixed-window', limit: 5, period: '1m', sync: 'write-back' })]
  const [first] = await redis.store.merge([{ key: 'k', policies, units: 7, origin: 'east', seq: 3 }])
  const [again] = await redis.store.merge([{ key: 'k', policies, units: 7, origin: 'east', seq: 3 }])
  assert.deepEqual([first.applied, again.applied], [true, false])
  assert.equal(first.records[0].state![1], 7)
  assert.deepEqual(again.records, first.records)
  const record = policyKey('fg:', 'k', policies[0])
  assert.deepEqual((await redis.client.keys('*')).sort(), ['fg:wt:east', record])
  // A merge that moves the record's expiry (GCRA units owed an hour ahead) moves the token's with it.
  const slow = [createPolicy({ name: 's', algorithm: 'gcra', limit: 1, period: '1m', sync: 'write-back' })]
  const slowRecord = policyKey('fg:', 'k', slow[0])
  await redis.store.merge([{ key: 'k', policies: slow, units: 1, origin: 'east', seq: 4 }])
  const [moved] = await redis.store.merge([{ key: 'k', policies: slow, units: 60, origin: 'east', seq: 5 }])
  assert.equal(moved.applied, true)
  const tokenTtl = await redis.client.pttl('fg:wt:east')
  const recordTtl = await redis.client.pttl(slowRecord)
  assert.ok(recordTtl > 3_600_000 && Math.abs(tokenTtl - recordTtl) < 50, `the token moves with its record (${tokenTtl}, ${recordTtl})`)
  const [replay] = await redis.store.merge([{ key: 'k', policies: slow, units: 60, origin: 'east', seq: 5 }])
  assert.equal(replay.applied, false)
  // A record is kept for its algorithm's ttl: an empty bucket of 1 per hour refills in an hour.
  const hourly = [createPolicy({ name: 'h', algorithm: 'token-bucket', limit: 1, period: '1h', sync: 'write-back' })]
  await redis.store.merge([{ key: 'k', policies: hourly, units: 1 }])
  const kept = await redis.client.pttl(policyKey('fg:', 'k', hourly[0]))
  assert.ok(kept > 3_500_000 && kept <= 3_600_000 + 128_000, `pttl ${kept}`)
})
