// RedisStore on a real redis-server: how records are stored, their expiry and TTLs, and what is refused as not a record.

import { test, beforeEach } from 'node:test'
import assert from 'node:assert/strict'
import { ALGORITHMS, createPolicies, type Policy, type PolicyOptions } from '../../../src/core/policy.js'
import { evaluateKey, type PolicyRecord } from '../../../src/core/evaluate.js'
import { policyKey } from '../../../src/stores/redis/keys.js'
import { readRecord, storedExpiry } from './records.js'
import type { EvaluateResponse } from '../../../src/stores/store.js'
import { useRedisStore } from '../../support/redis-store.js'

const redis = useRedisStore()

beforeEach(async () => {
  await redis.client.flushdb()
})

async function serverTime(): Promise<number> {
  const [seconds, micros] = await redis.client.time()
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)
}

/**
 * The most a record's expiry is padded past its ttl (see paddedExpiry in scripts/record.lua and the
 * pad in runner.lua): 1 s, a sixteenth of the ttl, or 16 units' refill up to a sixteenth of the period.
 */
function maxPadMs(ttlMs: number, policy: Policy): number {
  return Math.max(1_000, ttlMs / 16, Math.min((16 * policy.periodMs) / policy.limit, policy.periodMs / 16))
}

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
