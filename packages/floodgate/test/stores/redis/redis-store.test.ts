// RedisStore on a real redis-server: decisions, atomic multi-policy, tick batching, reset, prefixes, bad requests and options.

import { test, beforeEach } from 'node:test'
import assert from 'node:assert/strict'
import { Redis } from 'ioredis'
import { createPolicies, createPolicy } from '../../../src/core/policy.js'
import { FloodgateError } from '../../../src/core/errors.js'
import { RedisStore } from '../../../src/redis.js'
import { policyId, policyKey } from '../../../src/stores/redis/keys.js'
import type { EvaluateRequest } from '../../../src/stores/store.js'
import { useRedisStore } from '../../support/redis-store.js'

const redis = useRedisStore()

beforeEach(async () => {
  await redis.client.flushdb()
})

const perMinute = createPolicies([{ name: 'minute', algorithm: 'fixed-window', limit: 10, period: '1m' }])

/** Script calls the server has run since the last CONFIG RESETSTAT (EVALSHA plus EVAL fallbacks). */
async function scriptCalls(): Promise<number> {
  const info = await redis.client.info('commandstats')
  let calls = 0
  for (const match of info.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)) calls += Number(match[1])
  return calls
}

async function serverTime(): Promise<number> {
  const [seconds, micros] = await redis.client.time()
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)
}

test('charges, denies past the limit and reports what is left', async () => {
  const request = { key: 'user:1', policies: perMinute, cost: 4, now: 60_000 }
  const [first] = await redis.store.evaluate([request])
  assert.equal(first.allowed, true)
  assert.equal(first.now, 60_000)
  assert.deepEqual(first.results, [{ allowed: true, remaining: 6, resetMs: 60_000, retryAfterMs: 0, delayMs: 0, blocked: false }])
  await redis.store.evaluate([request])
  const [third] = await redis.store.evaluate([{ ...request, now: 90_000 }])
  assert.equal(third.allowed, false)
  assert.deepEqual(third.results[0], { allowed: false, remaining: 2, resetMs: 30_000, retryAfterMs: 30_000, delayMs: 0, blocked: false })
  const [peek] = await redis.store.evaluate([{ ...request, cost: 0, now: 90_000 }])
  assert.equal(peek.allowed, true)
  assert.equal(peek.results[0].remaining, 2)
  const [refund] = await redis.store.evaluate([{ ...request, cost: -3, now: 90_000 }])
  assert.equal(refund.results[0].remaining, 5)
})

test('several policies are decided all-or-nothing: a denial charges none of them', async () => {
  const policies = createPolicies([
    { name: 'wide', algorithm: 'sliding-window', limit: 5, period: '1m' },
    { name: 'narrow', algorithm: 'token-bucket', limit: 2, period: '1m' },
  ])
  const request = { key: 'k', policies, cost: 1, now: 1_000_000 }
  for (let i = 0; i < 2; i++) assert.equal((await redis.store.evaluate([request]))[0].allowed, true)
  const [denied] = await redis.store.evaluate([request])
  assert.equal(denied.allowed, false)
  assert.equal(denied.results[1].allowed, false)
  // `wide` would have allowed; it was not charged and says so (re-peeked).
  assert.deepEqual([denied.results[0].allowed, denied.results[0].remaining], [true, 3])
  const [peek] = await redis.store.evaluate([{ ...request, cost: 0 }])
  assert.equal(peek.results[0].remaining, 3)
})

test('a block period starts on denial and denies every charge until it ends', async () => {
  const policies = createPolicies([{ name: 'strict', algorithm: 'fixed-window', limit: 1, period: '1s', blockMs: '10s' }])
  const at = (now: number) => ({ key: 'abuser', policies, cost: 1, now })
  assert.equal((await redis.store.evaluate([at(0)]))[0].allowed, true)
  const [denied] = await redis.store.evaluate([at(500)])
  assert.deepEqual([denied.allowed, denied.results[0].blocked, denied.results[0].retryAfterMs], [false, false, 10_000])
  const [blocked] = await redis.store.evaluate([at(5_000)])
  assert.deepEqual([blocked.allowed, blocked.results[0].blocked, blocked.results[0].retryAfterMs], [false, true, 5_500])
  assert.equal((await redis.store.evaluate([at(10_500)]))[0].allowed, true)
})

test('decisions of one tick are batched into one script call, each answer going to its caller', async () => {
  await redis.store.evaluate([{ key: 'warm-up', policies: perMinute, cost: 1 }]) // loads the script
  await redis.client.config('RESETSTAT')
  const calls = Array.from({ length: 100 }, (_, i) =>
    redis.store.evaluate([{ key: `user:${i}`, policies: perMinute, cost: (i % 5) + 1, now: 120_000 }]),
  )
  const responses = await Promise.all(calls)
  assert.equal(await scriptCalls(), 1)
  responses.forEach(([response], i) => assert.equal(response.results[0].remaining, 10 - ((i % 5) + 1), `caller ${i}`))
})

test('a big batch for an idle server goes in two halves, one at once; what comes meanwhile goes with the other half', async (t) => {
  const admin = new Redis(redis.server.port, redis.server.host)
  await admin.ping()
  // The lane gives up on a call that has not answered for STALL_MS (20 ms) and sends what waits
  // anyway: a third call whenever the paused server is not released within 20 ms, as on a busy
  // machine. That timer never fires here, so the calls are the halving's alone.
  t.mock.timers.enable({ apis: ['setTimeout'] })
  try {
    await redis.client.config('RESETSTAT')
    // Scripts stall on the server until UNPAUSE, so the calls stay in flight while the test looks.
    await admin.call('CLIENT', 'PAUSE', '10000', 'WRITE')
    const first = Array.from({ length: 300 }, (_, i) =>
      redis.store.evaluate([{ key: `part:${i}`, policies: perMinute, cost: 1, now: 120_000 }]),
    )
    await new Promise((resolve) => setImmediate(resolve))
    const second = Array.from({ length: 300 }, (_, i) =>
      redis.store.evaluate([{ key: `part:${i}`, policies: perMinute, cost: 2, now: 120_000 }]),
    )
    await new Promise((resolve) => setImmediate(resolve))
    await admin.call('CLIENT', 'UNPAUSE')
    const [firstAnswers, secondAnswers] = await Promise.all([Promise.all(first), Promise.all(second)])
    assert.equal(await scriptCalls(), 2)
    for (const [response] of firstAnswers) assert.equal(response.results[0].remaining, 9)
    for (const [response] of secondAnswers) assert.equal(response.results[0].remaining, 7)
  } finally {
    admin.disconnect()
  }
})

test('requests for one key in one tick are decided in call order, as if one after another', async () => {
  await redis.client.config('RESETSTAT')
  const request = { key: 'hot', policies: perMinute, cost: 1, now: 120_000 }
  const responses = await Promise.all(Array.from({ length: 15 }, () => redis.store.evaluate([request])))
  assert.equal(await scriptCalls(), 1)
  assert.deepEqual(
    responses.map(([r]) => r.allowed),
    [...Array(10).fill(true), ...Array(5).fill(false)],
  )
  assert.deepEqual(
    responses.slice(0, 10).map(([r]) => r.results[0].remaining),
    [9, 8, 7, 6, 5, 4, 3, 2, 1, 0],
  )
})

test('one evaluate with many requests answers in order; big batches are split by maxBatchSize', async () => {
  const small = new RedisStore({ client: redis.client, maxBatchSize: 7 })
  await small.evaluate([{ key: 'warm-up', policies: perMinute, cost: 1 }])
  await redis.client.config('RESETSTAT')
  const batch: EvaluateRequest[] = Array.from({ length: 20 }, (_, i) => ({ key: `b${i % 4}`, policies: perMinute, cost: 1, now: 0 }))
  const responses = await small.evaluate(batch)
  assert.equal(await scriptCalls(), 3)
  assert.deepEqual(
    responses.map((r) => r.results[0].remaining),
    batch.map((_, i) => 9 - Math.floor(i / 4)),
  )
})

test('a failing call rejects every caller in it and writes nothing', async () => {
  const broken = createPolicy({ name: 'p', algorithm: 'fixed-window', limit: 5, period: '1m' })
  await redis.client.set(policyKey('fg:', 'not-a-string', broken), 'not a record') // the script cannot decode it
  const good = redis.store.evaluate([{ key: 'innocent', policies: [broken], cost: 1, now: 0 }])
  const bad = redis.store.evaluate([{ key: 'not-a-string', policies: [broken], cost: 1, now: 0 }])
  await assert.rejects(good, /does not hold a Floodgate record/)
  await assert.rejects(bad, /fg:{not-a-string}:\S+:fw does not hold a Floodgate record .*; delete the key/)
  assert.equal(await redis.client.exists(policyKey('fg:', 'innocent', broken)), 0)
  const [after] = await redis.store.evaluate([{ key: 'innocent', policies: [broken], cost: 1, now: 0 }])
  assert.equal(after.results[0].remaining, 4)
})

test('without a now, the server clock decides', async () => {
  const policies = createPolicies([{ name: 'three', algorithm: 'fixed-window', limit: 3, period: '1h' }])
  const before = await serverTime()
  const responses = await redis.store.evaluate(Array.from({ length: 4 }, () => ({ key: 'clock', policies, cost: 1 })))
  const after = await serverTime()
  for (const response of responses)
    assert.ok(response.now >= before && response.now <= after, `now ${response.now} in [${before}, ${after}]`)
  assert.deepEqual(
    responses.map((r) => r.allowed),
    [true, true, true, false],
  )
  const windowEnd = Math.floor(responses[3].now / 3_600_000) * 3_600_000 + 3_600_000
  assert.equal(responses[3].results[0].retryAfterMs, windowEnd - responses[3].now)
})

test('reset forgets counters and blocks of the key, and only of that key', async () => {
  const policies = createPolicies([
    { name: 'a', algorithm: 'fixed-window', limit: 1, period: '1m', blockMs: '1h' },
    { name: 'b', algorithm: 'gcra', limit: 1, period: '1m' },
  ])
  for (const key of ['x', 'y']) {
    await redis.store.evaluate([{ key, policies, cost: 1, now: 0 }])
    assert.equal((await redis.store.evaluate([{ key, policies, cost: 1, now: 0 }]))[0].allowed, false)
  }
  await redis.store.reset('x', policies)
  assert.equal(await redis.client.exists(...policies.map((p) => policyKey('fg:', 'x', p))), 0)
  assert.equal((await redis.store.evaluate([{ key: 'x', policies, cost: 1, now: 1 }]))[0].allowed, true)
  assert.equal((await redis.store.evaluate([{ key: 'y', policies, cost: 1, now: 1 }]))[0].allowed, false)
})

test('the prefix keeps stores apart on one server', async () => {
  const other = new RedisStore({ client: redis.client, prefix: 'other:' })
  await redis.store.evaluate([{ key: 'k', policies: perMinute, cost: 10, now: 0 }])
  const [response] = await other.evaluate([{ key: 'k', policies: perMinute, cost: 1, now: 0 }])
  assert.equal(response.results[0].remaining, 9)
  assert.equal(await redis.client.exists(`other:{k}:${policyId('minute')}:fw`), 1)
})

test('bad requests are refused with INVALID_REQUEST before reaching Redis', async () => {
  const bad: unknown[] = [
    { key: 'k', policies: perMinute, cost: Number.NaN },
    { key: 42, policies: perMinute, cost: 1 },
    { key: 'k', policies: [], cost: 1 },
    { key: 'k', policies: perMinute, cost: 1, now: Number.POSITIVE_INFINITY },
  ]
  for (const request of bad) {
    await assert.rejects(
      redis.store.evaluate([request as EvaluateRequest]),
      (error: unknown) => error instanceof FloodgateError && error.code === 'INVALID_REQUEST',
    )
  }
})

test('misconfiguration is refused with INVALID_OPTION and a message saying what to change', () => {
  const prefixed = new Redis({ lazyConnect: true, keyPrefix: 'app:' })
  const cases: [unknown, RegExp][] = [
    [{}, /give one of client, url, redis or cluster/],
    [{ client: redis.client, url: redis.server.url }, /only one of/],
    [{ client: redis.client, prefix: '{x}' }, /without '\{'/],
    [{ client: redis.client, maxBatchSize: 0 }, /maxBatchSize/],
    [{ url: 'http://localhost' }, /redis:\/\//],
    [{ client: prefixed }, /keyPrefix.*prefix/],
    [{ client: {} }, /ioredis Redis or Cluster/],
  ]
  for (const [options, message] of cases) {
    assert.throws(
      () => new RedisStore(options as ConstructorParameters<typeof RedisStore>[0]),
      (error: unknown) => error instanceof FloodgateError && error.code === 'INVALID_OPTION' && message.test(error.message),
      JSON.stringify(options, (key, value) => (key === 'client' ? typeof value : value)),
    )
  }
  prefixed.disconnect()
})
