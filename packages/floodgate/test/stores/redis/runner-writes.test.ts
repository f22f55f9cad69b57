// How the runner (scripts/record.lua) writes a record that keeps its key's expiry: in place (SETRANGE) when the new
// record has the stored one's length, SET ... KEEPTTL when it does not; either way the key keeps
// its TTL and holds exactly the new record. A record that needs a later expiry is written in place
// and given it with PEXPIREAT, and a bucket's expiry is padded so that it lasts for several units.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Redis } from 'ioredis'
import { createPolicies } from '../../../src/core/policy.js'
import { RedisStore } from '../../../src/redis.js'
import { policyKey } from '../../../src/stores/redis/keys.js'
import { readRecord, storedExpiry } from './records.js'
import { startRedis } from '../../support/redis-server.js'

/** Runs `body` against a RedisStore on a redis-server of its own, stopped afterwards. */
async function onOwnServer(body: (client: Redis, store: RedisStore) => Promise<void>): Promise<void> {
  const server = await startRedis()
  const client = new Redis(server.port, server.host)
  const store = new RedisStore({ client, prefix: 'w:' })
  try {
    await body(client, store)
  } finally {
    await store.close()
    client.disconnect()
    await server.stop()
  }
}

async function calls(client: Redis, command: string): Promise<number> {
  const info = await client.info('commandstats')
  return Number(new RegExp(`^cmdstat_${command}:calls=(\\d+)`, 'm').exec(info)?.[1] ?? 0)
}

const HOUR = 3_600_000

test('a record of the same length is overwritten in place: SETRANGE, the TTL kept', () =>
  onOwnServer(async (client, store) => {
    const policies = createPolicies([{ name: 'hourly', algorithm: 'fixed-window', limit: 100, period: '1h' }])
    const key = policyKey('w:', 'same', policies[0])
    const start = (Math.floor(Date.now() / HOUR) + 2) * HOUR
    await store.evaluate([{ key: 'same', policies, cost: 1, now: start + 10 }])
    const before = (await client.getBuffer(key))!
    // A longer TTL set behind the store's back survives only a write that keeps it.
    await client.pexpire(key, 5 * HOUR)
    assert.equal(await calls(client, 'setrange'), 0)
    await store.evaluate([{ key: 'same', policies, cost: 1, now: start + 20 }])
    const after = (await client.getBuffer(key))!
    assert.equal(after.length, before.length)
    assert.deepEqual((await readRecord(client, key))?.state, [start, 2])
    assert.equal(storedExpiry(after), storedExpiry(before))
    assert.ok((await client.pttl(key)) > 4 * HOUR, 'the TTL kept')
    assert.equal(await calls(client, 'setrange'), 1)
  }))

test('a record whose length changes (a block starts, then ends) is SET with KEEPTTL', () =>
  onOwnServer(async (client, store) => {
    const policies = createPolicies([{ name: 'strict', algorithm: 'fixed-window', limit: 1, period: '1h', blockMs: '1m' }])
    const key = policyKey('w:', 'grows', policies[0])
    const start = (Math.floor(Date.now() / HOUR) + 2) * HOUR
    await store.evaluate([{ key: 'grows', policies, cost: 1, now: start + 10 }])
    const plain = (await client.getBuffer(key))!
    await client.pexpire(key, 5 * HOUR)
    const sets = await calls(client, 'set')
    // Denied: the record gains blockedUntil (8 bytes longer), written with KEEPTTL.
    const [denied] = await store.evaluate([{ key: 'grows', policies, cost: 1, now: start + 20 }])
    assert.equal(denied.allowed, false)
    const blocked = (await client.getBuffer(key))!
    assert.equal(blocked.length, plain.length + 8)
    assert.deepEqual(await readRecord(client, key), { blockedUntil: start + 20 + 60_000, state: [start, 1] })
    assert.ok((await client.pttl(key)) > 4 * HOUR, 'the TTL kept')
    assert.equal(await calls(client, 'set'), sets + 1)
    assert.equal(await calls(client, 'setrange'), 0)
    // After the block, a refund: the record drops blockedUntil (8 bytes shorter), again with KEEPTTL.
    await store.evaluate([{ key: 'grows', policies, cost: -1, now: start + 20 + 60_001 }])
    assert.deepEqual(await readRecord(client, key), { blockedUntil: 0, state: [start, 0] })
    assert.equal((await client.getBuffer(key))!.length, plain.length)
    assert.ok((await client.pttl(key)) > 4 * HOUR, 'the TTL kept')
    assert.equal(await calls(client, 'set'), sets + 2)
    assert.equal(await calls(client, 'setrange'), 0)
  }))

test('a record of the same length that needs a later expiry is written in place, then PEXPIREAT', () =>
  onOwnServer(async (client, store) => {
    const policies = createPolicies([{ name: 'hourly', algorithm: 'fixed-window', limit: 100, period: '1h' }])
    const key = policyKey('w:', 'later', policies[0])
    const start = (Math.floor(Date.now() / HOUR) + 2) * HOUR
    await store.evaluate([{ key: 'later', policies, cost: 1, now: start + 10 }])
    const sets = await calls(client, 'set')
    // The next window's record: as long as the last, kept until that window's end.
    const serverNow = async () => {
      const [seconds, micros] = await client.time()
      return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)
    }
    const before = await serverNow()
    await store.evaluate([{ key: 'later', policies, cost: 1, now: start + HOUR + 10 }])
    const bytes = (await client.getBuffer(key))!
    assert.deepEqual((await readRecord(client, key))?.state, [start + HOUR, 1])
    const expiry = storedExpiry(bytes)
    assert.ok(expiry >= start + 2 * HOUR, `expiry ${expiry - start} ms after start`)
    const pttl = await client.pttl(key)
    const after = await serverNow()
    assert.ok(pttl <= expiry - before && pttl >= expiry - after, `pttl ${pttl}: the key has the expiry its record says`)
    assert.deepEqual([await calls(client, 'set'), await calls(client, 'setrange'), await calls(client, 'pexpireat')], [sets, 1, 1])
  }))

// 32 s: the largest grid (1 s doubled) within 16 units of 1000 per hour, 16 * 3.6 s.
const BUCKET_GRID_MS = 32_000

for (const options of [
  { algorithm: 'gcra' },
  { algorithm: 'token-bucket' },
  { algorithm: 'leaky-bucket' },
  { algorithm: 'leaky-bucket', shaping: true },
] as const) {
  const name = `${options.algorithm}${'shaping' in options ? ' (shaping)' : ''}`
  test(`a ${name} record taking units faster than it refills keeps one expiry for 8 of them`, () =>
    onOwnServer(async (client, store) => {
      const policies = createPolicies([{ name: 'bucket', ...options, limit: 1_000, burst: 1_000, period: '1h' }])
      const key = policyKey('w:', 'burst', policies[0])
      // On the grid and a little ahead of the server clock, so the first write's expiry is now + 32 s.
      const now = Math.ceil((Date.now() + 5_000) / BUCKET_GRID_MS) * BUCKET_GRID_MS
      const expirySets = async () => (await calls(client, 'set')) + (await calls(client, 'pexpireat'))
      const expiries: number[] = []
      for (let unit = 1; unit <= 9; unit++) {
        const [response] = await store.evaluate([{ key: 'burst', policies, cost: 1, now }])
        assert.equal(response.allowed, true)
        expiries.push(storedExpiry((await client.getBuffer(key))!))
        // Each unit puts the state's lapse 3.6 s later: 8 units fit in the first expiry, the 9th does not.
        assert.equal(await expirySets(), unit <= 8 ? 1 : 2, `unit ${unit}`)
      }
      assert.deepEqual(expiries, [...Array(8).fill(now + BUCKET_GRID_MS), now + 2 * BUCKET_GRID_MS])
    }))
}
