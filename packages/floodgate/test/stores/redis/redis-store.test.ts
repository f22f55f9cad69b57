// RedisStore on a real redis-server: decisions, atomic multi-policy, tick batching, TTLs, reset, options.

import { test, beforeEach } from 'node:test'
import { once } from 'node:events'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Cluster, Redis } from 'ioredis'
import { ALGORITHMS, createPolicies, createPolicy, type Policy, type PolicyOptions } from '../../../src/core/policy.js'
import { evaluateKey, type PolicyRecord } from '../../../src/core/evaluate.js'
import { FloodgateError } from '../../../src/core/errors.js'
import { RedisStore } from '../../../src/redis.js'
import { policyId, policyKey } from '../../../src/stores/redis/keys.js'
import { keySlot } from '../../../src/stores/redis/slot.js'
import { STALL_MS } from '../../../src/stores/redis/lane.js'
import { readRecord, storedExpiry } from './records.js'
import type { EvaluateRequest, EvaluateResponse } from '../../../src/stores/store.js'
import { freePort, startRedis, type RedisProcess } from '../../support/redis-server.js'
import { startCluster } from '../../support/redis-cluster.js'
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

test('records are stored as blockedUntil and state under the documented key, with a TTL', async () => {
  const policies = createPolicies([{ name: 'fw', algorithm: 'fixed-window', limit: 3, period: '10s' }])
  const [response] = await redis.store.evaluate([{ key: 'a{b}', policies, cost: 2 }])
  // The layout pinned: a change of policy ids would start every counter afresh on upgrade.
  const key = 'fg:{a%7Bb%7D}:zvQ554:fw'
  assert.equal(policyKey('fg:', 'a{b}', policies[0]), key)
  const windowStart = Math.floor(response.now / 10_000) * 10_000
  assert.deepEqual(await readRecord(redis.client, key), { blockedUntil: 0, state: [windowStart, 2] })
  const ttl = await redis.client.pttl(key)
  assert.ok(ttl > 0 && ttl <= windowStart + 10_000 - response.now, `pttl ${ttl}`)
})

test('a record expires once its padded expiry has passed, so Redis holds only active keys', async () => {
  // A ttl of 2 s (one unit's refill): the record is read long before it could expire, however busy
  // the machine (with 100 ms it was sometimes gone before the test read it).
  const policies = createPolicies([{ name: 'short', algorithm: 'token-bucket', limit: 2, period: '4s' }])
  const [response] = await redis.store.evaluate([{ key: 'brief', policies, cost: 1 }])
  const [ttl] = evaluateKey([undefined], response.now, 1, policies).ttlMs
  const key = policyKey('fg:', 'brief', policies[0])
  const expiry = storedExpiry((await redis.client.getBuffer(key))!)!
  assert.ok(
    expiry >= response.now + ttl && expiry < response.now + ttl + maxPadMs(ttl, policies[0]),
    `expiry ${expiry - response.now} ms ahead`,
  )
  // Until the server's clock has passed the expiry (not for a time of ours).
  while ((await serverTime()) <= expiry) await new Promise((resolve) => setTimeout(resolve, 100))
  assert.equal(await redis.client.exists(key), 0)
})

/**
 * The most a record's expiry is padded past its ttl (see paddedExpiry in scripts/record.lua and the
 * pad in runner.lua): 1 s, a sixteenth of the ttl, or 16 units' refill up to a sixteenth of the period.
 */
function maxPadMs(ttlMs: number, policy: Policy): number {
  return Math.max(1_000, ttlMs / 16, Math.min((16 * policy.periodMs) / policy.limit, policy.periodMs / 16))
}

test('every record carries its expiry: at least its ttl away, padded by at most maxPadMs', async () => {
  const cases: PolicyOptions[] = [
    ...ALGORITHMS.map((algorithm): PolicyOptions => ({ algorithm, limit: 10, period: '1h' })),
    ...ALGORITHMS.map((algorithm): PolicyOptions => ({ algorithm, limit: 2, period: '100ms' })),
    { algorithm: 'fixed-window', limit: 1, period: '1s', blockMs: '10m' },
  ]
  for (const [i, options] of cases.entries()) {
    const policies = createPolicies([{ name: `p${i}`, ...options }])
    const cost = options.blockMs === undefined ? 1 : 2
    // A 100 ms policy's record lives some 50 ms (plus its pad): on a busy machine it may be gone
    // before the test reads it. Then the case runs again on a fresh key (a record that never lived
    // would be gone every time).
    let attempt = 0
    let read: { response: EvaluateResponse; key: string; record: Buffer; pttl: number } | undefined
    while (read === undefined && attempt < 20) {
      const key = policyKey('fg:', `padded-${attempt++}`, policies[0])
      const [response] = await redis.store.evaluate([{ key: `padded-${attempt - 1}`, policies, cost }])
      const [record, pttl] = [await redis.client.getBuffer(key), await redis.client.pttl(key)]
      if (record !== null && pttl >= 0) read = { response, key, record, pttl }
    }
    assert.ok(
      read,
      `${options.algorithm} ${options.limit}/${options.period}: the record was gone before it could be read, ${attempt} times`,
    )
    const { response, record, pttl } = read
    const after = await serverTime()
    const [ttl] = evaluateKey([undefined], response.now, cost, policies).ttlMs
    const expiry = storedExpiry(record)!
    const label = `${options.algorithm} ${options.limit}/${options.period}: ttl ${ttl}, expiry ${expiry - response.now} ms ahead`
    assert.ok(expiry >= response.now + ttl, label)
    assert.ok(expiry < response.now + ttl + maxPadMs(ttl, policies[0]), label)
    assert.ok(pttl <= expiry - response.now && pttl >= expiry - after, `${label}, pttl ${pttl}: the key has the expiry its record says`)
  }
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

test('a store made from a URL owns its client and closes it; a given client stays open', async () => {
  const owned = new RedisStore({ url: redis.server.url, prefix: 'url:' })
  const [response] = await owned.evaluate([{ key: 'k', policies: perMinute, cost: 1 }])
  assert.equal(response.allowed, true)
  await owned.close()
  assert.equal((owned.client as Redis).status, 'end')
  const borrowed = new RedisStore({ client: redis.client })
  await borrowed.close()
  assert.equal(redis.client.status, 'ready')
})

test('calls made before the first connection wait for it, also on a lazyConnect client', async () => {
  const lazy = new Redis({ host: redis.server.host, port: redis.server.port, lazyConnect: true })
  const lazyStore = new RedisStore({ client: lazy, prefix: 'lazy:' })
  const [response] = await lazyStore.evaluate([{ key: 'k', policies: perMinute, cost: 1, now: 0 }])
  assert.equal(response.results[0].remaining, 9)
  await lazyStore.close()
  lazy.disconnect()
})

test('a server that is down is never sent a call: refused with STORE_UNAVAILABLE, not replayed once it is up', async () => {
  const port = await freePort()
  const late = new RedisStore({ url: `redis://127.0.0.1:${port}`, redis: { retryStrategy: () => 50 } })
  let lateServer: RedisProcess | undefined
  try {
    for (let i = 0; i < 3; i++) {
      await assert.rejects(
        late.evaluate([{ key: 'k', policies: perMinute, cost: 1, now: 0 }]),
        (error: unknown) => error instanceof FloodgateError && error.code === 'STORE_UNAVAILABLE',
      )
    }
    lateServer = await startRedis([], port)
    if (!late.connected) await once(late, 'available')
    const [response] = await late.evaluate([{ key: 'k', policies: perMinute, cost: 1, now: 0 }])
    assert.equal(response.results[0].remaining, 9, 'none of the refused calls was charged')
  } finally {
    await late.close()
    await lateServer?.stop()
  }
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

test('a write whose record needs no later expiry keeps the key TTL', async () => {
  const policies = createPolicies([{ name: 'hourly', algorithm: 'fixed-window', limit: 100, period: '1h' }])
  const key = policyKey('fg:', 'kept', policies[0])
  const [first] = await redis.store.evaluate([{ key: 'kept', policies, cost: 1 }])
  const windowEnd = Math.floor(first.now / 3_600_000) * 3_600_000 + 3_600_000
  const expiry = storedExpiry((await redis.client.getBuffer(key))!)!
  assert.ok(expiry >= windowEnd && expiry < windowEnd + maxPadMs(windowEnd - first.now, policies[0]), 'kept to the window end, padded')
  // A longer TTL set behind the store's back survives the next write only if that write keeps it.
  await redis.client.pexpire(key, 3 * 3_600_000)
  await redis.store.evaluate([{ key: 'kept', policies, cost: 1 }])
  assert.deepEqual((await readRecord(redis.client, key))?.state, [windowEnd - 3_600_000, 2])
  assert.ok((await redis.client.pttl(key)) > 2 * 3_600_000, 'KEEPTTL, not PXAT')
  assert.equal(storedExpiry((await redis.client.getBuffer(key))!), expiry)
})

test('a GCRA key charged again before its padded expiry keeps it; one charged past it gets a later one', async () => {
  // 1,000 per second: each charge pushes the TAT 1 ms, so the ttl stays a few ms and the pad is 1 s.
  const policies = createPolicies([{ name: 'fast', algorithm: 'gcra', limit: 1_000, period: '1s', burst: 100_000 }])
  const key = policyKey('fg:', 'busy', policies[0])
  const start = (Math.floor(Date.now() / 1_000) + 5) * 1_000
  await redis.store.evaluate([{ key: 'busy', policies, cost: 10, now: start + 100 }])
  const expiry = storedExpiry((await redis.client.getBuffer(key))!)!
  await redis.client.pexpire(key, 60_000)
  await redis.store.evaluate([{ key: 'busy', policies, cost: 10, now: start + 200 }])
  assert.equal(storedExpiry((await redis.client.getBuffer(key))!), expiry)
  assert.ok((await redis.client.pttl(key)) > 30_000, 'KEEPTTL, not PXAT')
  // A charge pushing the TAT past the expiry: a new, later one.
  await redis.store.evaluate([{ key: 'busy', policies, cost: 5_000, now: start + 300 }])
  const later = storedExpiry((await redis.client.getBuffer(key))!)!
  assert.ok(later > expiry, `${later} > ${expiry}`)
  assert.ok((await redis.client.pttl(key)) < 30_000, 'a new expiry')
})

test('a window record in a later window gets a new expiry', async () => {
  const hour = 3_600_000
  const policies = createPolicies([{ name: 'hourly', algorithm: 'fixed-window', limit: 100, period: '1h' }])
  const key = policyKey('fg:', 'next-window', policies[0])
  // Clocks ahead of the server's (a `now` given), so both windows are still to come for Redis.
  const start = (Math.floor(Date.now() / hour) + 1) * hour
  const before = await serverTime()
  await redis.store.evaluate([{ key: 'next-window', policies, cost: 1, now: start + 10 }])
  const first = storedExpiry((await redis.client.getBuffer(key))!)!
  assert.ok(
    first >= start + hour && first < start + hour + maxPadMs(start + hour - before, policies[0]),
    `${first - start - hour} ms past the window`,
  )
  const beforeNext = await serverTime()
  await redis.store.evaluate([{ key: 'next-window', policies, cost: 1, now: start + hour + 10 }])
  assert.deepEqual((await readRecord(redis.client, key))?.state, [start + hour, 1])
  const second = storedExpiry((await redis.client.getBuffer(key))!)!
  assert.ok(
    second >= start + 2 * hour && second < start + 2 * hour + maxPadMs(start + 2 * hour - beforeNext, policies[0]),
    `${second - start - 2 * hour} ms past the window`,
  )
  const ttl = await redis.client.pttl(key)
  assert.ok(ttl <= second - beforeNext && ttl >= second - (await serverTime()), `pttl ${ttl}`)
})

test('a record without its expiry (a lower-case tag) is refused as not a record, and nothing is written', async () => {
  const policies = createPolicies([{ name: 'old', algorithm: 'fixed-window', limit: 10, period: '1h' }])
  const key = policyKey('fg:', 'untagged', policies[0])
  const text = Buffer.alloc(17)
  text.write('s', 0, 'latin1')
  text.writeDoubleLE(5, 1)
  text.writeDoubleLE(3, 9)
  await redis.client.set(key, text)
  await assert.rejects(redis.store.evaluate([{ key: 'untagged', policies, cost: 1, now: 10 }]), /does not hold a Floodgate record/)
  assert.deepEqual(await redis.client.getBuffer(key), text)
})

test('a state longer than one encoding chunk is stored and read back exactly', async () => {
  const policies = createPolicies([{ name: 'log', algorithm: 'sliding-log', limit: 100, period: '1h' }])
  let record: PolicyRecord | undefined
  for (let i = 0; i < 80; i++) {
    const now = 1_000 + i * 7.5
    const [response] = await redis.store.evaluate([{ key: 'long', policies, cost: 1, now }])
    const expected = evaluateKey([record], now, 1, policies)
    record = expected.records[0]
    assert.deepEqual(response.results, expected.results, `charge ${i + 1}`)
  }
  const stored = await readRecord(redis.client, policyKey('fg:', 'long', policies[0]))
  assert.equal(stored?.state?.length, 160)
  assert.deepEqual(stored, { blockedUntil: 0, state: [...record!.state!] })
})

test('a block without a state is stored as such and still blocks', async () => {
  const policies = createPolicies([{ name: 'strict', algorithm: 'fixed-window', limit: 2, period: '1m', blockMs: '10s' }])
  const [denied] = await redis.store.evaluate([{ key: 'abuser', policies, cost: 5, now: 1_000 }])
  assert.equal(denied.allowed, false)
  assert.deepEqual(await readRecord(redis.client, policyKey('fg:', 'abuser', policies[0])), { blockedUntil: 11_000, state: undefined })
  const [later] = await redis.store.evaluate([{ key: 'abuser', policies, cost: 1, now: 5_000 }])
  assert.equal(later.results[0].blocked, true)
  assert.equal(later.results[0].retryAfterMs, 6_000)
})

test('a store made from Sentinel options finds the master through the sentinel', async () => {
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-sentinel-'))
  const config = join(dir, 'sentinel.conf')
  writeFileSync(config, `port ${port}\nbind 127.0.0.1\ndir ${dir}\nsentinel monitor main 127.0.0.1 ${redis.server.port} 1\n`)
  const sentinel = spawn('redis-server', [config, '--sentinel'], { stdio: 'ignore' })
  const store = new RedisStore({
    redis: { sentinels: [{ host: '127.0.0.1', port }], name: 'main', sentinelRetryStrategy: (times: number) => (times > 100 ? null : 50) },
    prefix: 'sentinel:',
  })
  try {
    const [response] = await store.evaluate([{ key: 'k', policies: perMinute, cost: 3, now: 0 }])
    assert.equal(response.results[0].remaining, 7)
    assert.deepEqual(
      await readRecord(redis.client, `sentinel:{k}:${policyId('minute')}:fw`),
      { blockedUntil: 0, state: [0, 3] },
      'written on the master the sentinel named',
    )
  } finally {
    await store.close()
    const exited = once(sentinel, 'exit')
    sentinel.kill('SIGTERM')
    await exited
    rmSync(dir, { recursive: true, force: true })
  }
})

test('on a Cluster, a slot that moved under a whole-node batch is retried slot by slot, each request counted once', async () => {
  const cluster = await startCluster({ masters: 3, replicasPerMaster: 0 })
  const clusterClient = new Cluster([...cluster.startupNodes])
  const nodes = new Map<number, Redis>(cluster.nodes.map((node) => [node.port, new Redis(node.port, node.host)]))
  const clusterStore = new RedisStore({ client: clusterClient })
  try {
    const moving = 'moving-user'
    const movingSlot = keySlot(policyKey('fg:', moving, perMinute[0]))
    const source = await cluster.masterOf(movingSlot)
    // Keys on the same master as the moving one, so one whole-node call holds them all.
    const neighbours: string[] = []
    for (let i = 0; neighbours.length < 20; i++) {
      const key = `neighbour-${i}`
      const slot = keySlot(policyKey('fg:', key, perMinute[0]))
      if (slot !== movingSlot && (await cluster.masterOf(slot)) === source) neighbours.push(key)
    }
    const everyone = [moving, ...neighbours]
    const charge = () => Promise.all(everyone.map((key) => clusterStore.evaluate([{ key, policies: perMinute, cost: 1, now: 0 }])))
    await charge()

    // Move the slot to another master behind the client's back (its slot map is now stale).
    const target = cluster.nodes.find((node) => node.port !== source)!.port
    const [sourceNode, targetNode] = [nodes.get(source)!, nodes.get(target)!]
    const [sourceId, targetId] = await Promise.all([sourceNode.call('CLUSTER', 'MYID'), targetNode.call('CLUSTER', 'MYID')])
    await targetNode.call('CLUSTER', 'SETSLOT', movingSlot, 'IMPORTING', String(sourceId))
    await sourceNode.call('CLUSTER', 'SETSLOT', movingSlot, 'MIGRATING', String(targetId))
    const keys = (await sourceNode.call('CLUSTER', 'GETKEYSINSLOT', movingSlot, 100)) as string[]
    await sourceNode.call('MIGRATE', '127.0.0.1', target, '', 0, 5000, 'KEYS', ...keys)
    for (const node of nodes.values()) await node.call('CLUSTER', 'SETSLOT', movingSlot, 'NODE', String(targetId))

    const responses = await charge()
    responses.forEach(([response], i) => assert.equal(response.results[0].remaining, 8, everyone[i]))
    assert.deepEqual(await readRecord(targetNode, policyKey('fg:', moving, perMinute[0])), { blockedUntil: 0, state: [0, 2] })
  } finally {
    await clusterStore.close()
    clusterClient.disconnect()
    for (const node of nodes.values()) node.disconnect()
    await cluster.stop()
  }
})

test('calls waiting behind one in flight are refused when the connection drops, never applied after reconnecting', async (t) => {
  const own = new Redis({ host: redis.server.host, port: redis.server.port, autoResendUnfulfilledCommands: false })
  own.on('error', () => undefined)
  const dropping = new RedisStore({ client: own })
  try {
    await dropping.evaluate([{ key: 'warm-up', policies: perMinute, cost: 1 }])
    // The lane's stall timer and ioredis's reconnect delay on mocked timers: they fire when the test
    // says, not when the machine's load decides.
    t.mock.timers.enable({ apis: ['setTimeout'] })
    // Writes (and so the script) stall on the server: the first call stays in flight.
    await redis.client.call('CLIENT', 'PAUSE', '10000', 'WRITE')
    const outcomes = Array.from({ length: 300 }, (_, i) =>
      dropping.evaluate([{ key: `drop:${i}`, policies: perMinute, cost: 1 }]).then(
        () => 'decided',
        () => 'refused',
      ),
    )
    // After this turn's flush one part is in flight and the other waits in the lane, which gives up
    // on the call in flight once it has been quiet for STALL_MS of performance.now().
    await new Promise((resolve) => setImmediate(resolve))
    const quietSince = performance.now()
    while (performance.now() - quietSince <= STALL_MS) await new Promise((resolve) => setImmediate(resolve))
    const reconnected = once(own, 'ready')
    own.disconnect(true)
    // The stall timer fires while the socket is closing (as it did on a busy machine): the waiting
    // part goes now, and must be refused, not left in ioredis's offline queue for the next connection.
    t.mock.timers.tick(STALL_MS)
    const answers = await Promise.all(outcomes)
    while (own.status !== 'ready') {
      t.mock.timers.tick(1_000)
      await new Promise((resolve) => setImmediate(resolve))
    }
    await reconnected
    await redis.client.call('CLIENT', 'UNPAUSE')
    await own.ping() // after anything ioredis replays on the new connection
    assert.deepEqual(answers, Array(300).fill('refused'))
    const keys = Array.from({ length: 300 }, (_, i) => policyKey('fg:', `drop:${i}`, perMinute[0]))
    const applied = (await Promise.all(keys.map((key) => redis.client.exists(key)))).flatMap((e, i) => (e ? [i] : []))
    assert.equal(applied.length, 0, `refused calls were applied later: drop:${applied[0]}..${applied.at(-1)}`)
  } finally {
    await dropping.close()
    own.disconnect()
  }
})

test('a store that cannot reach Redis warns once, and emits unavailable and available for each outage', async () => {
  const port = await freePort()
  const warnings: string[] = []
  const onWarning = (warning: Error & { code?: string }) => {
    if (warning.code === 'FLOODGATE_REDIS_UNAVAILABLE') warnings.push(warning.message)
  }
  process.on('warning', onWarning)
  const store = new RedisStore({ url: `redis://127.0.0.1:${port}`, prefix: 'outage:' })
  let lateServer: RedisProcess | undefined
  try {
    const [first] = (await once(store, 'unavailable')) as [Error]
    assert.match(first.message, /cannot reach Redis \(ioredis client status: \w+\)/)
    // Each event is awaited from before what causes it: it may come before that step returns.
    let next: Promise<unknown> = once(store, 'available')
    lateServer = await startRedis([], port)
    await next
    next = once(store, 'unavailable')
    await lateServer.stop()
    await next
    next = once(store, 'available')
    await lateServer.restart()
    await next
    const [response] = await store.evaluate([{ key: 'k', policies: perMinute, cost: 1, now: 0 }])
    assert.equal(response.results[0].remaining, 9)
    await new Promise((resolve) => setImmediate(resolve)) // warnings are emitted on the next tick
    assert.equal(warnings.length, 1, 'one warning per store, not per outage or per attempt')
    assert.match(warnings[0], /RedisStore cannot reach Redis.*'unavailable' event/)
  } finally {
    process.off('warning', onWarning)
    await store.close()
    await lateServer?.stop()
  }
})

test('a client its owner closes is a shutdown, not an outage: no warning, and later calls are refused', async () => {
  const warnings: string[] = []
  const onWarning = (warning: Error & { code?: string }) => {
    if (warning.code === 'FLOODGATE_REDIS_UNAVAILABLE') warnings.push(warning.message)
  }
  process.on('warning', onWarning)
  const client = new Redis({ host: redis.server.host, port: redis.server.port })
  const store = new RedisStore({ client, prefix: 'shutdown:' })
  let unavailable = 0
  store.on('unavailable', () => unavailable++)
  try {
    const [response] = await store.evaluate([{ key: 'k', policies: perMinute, cost: 1 }])
    assert.equal(response.allowed, true)
    const ended = once(client, 'end')
    await client.quit()
    await ended
    await new Promise((resolve) => setImmediate(resolve)) // warnings are emitted on the next tick
    assert.deepEqual(warnings, [])
    assert.equal(unavailable, 0)
    await assert.rejects(store.evaluate([{ key: 'k', policies: perMinute, cost: 1 }]), { code: 'STORE_UNAVAILABLE' })
  } finally {
    process.off('warning', onWarning)
    await store.close()
  }
})
