// How lease-runner.lua writes a key's records on renewal: in place, and with an expiry padded by a
// few lease times, so that a key renewed once a lease time gets a new expiry once in several
// renewals, not at every one, and never expires while a lease or its settling time needs it.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Redis } from 'ioredis'
import { createPolicies } from '../../../src/core/policy.js'
import { RedisStore } from '../../../src/redis.js'
import { policyKey } from '../../../src/stores/redis/keys.js'
import { ledgerKey } from '../../../src/stores/redis/lease-call.js'
import type { LeaseRequest } from '../../../src/stores/store.js'
import { readRecord } from './records.js'
import { startRedis } from '../../support/redis-server.js'

async function calls(client: Redis, command: string): Promise<number> {
  const info = await client.info('commandstats')
  return Number(new RegExp(`^cmdstat_${command}:calls=(\\d+)`, 'm').exec(info)?.[1] ?? 0)
}

test('a lease renewed once a lease time sets its keys an expiry once in several renewals', async () => {
  const server = await startRedis()
  const client = new Redis(server.port, server.host)
  const store = new RedisStore({ client, prefix: 'l:' })
  try {
    const policies = createPolicies([{ name: 'api', algorithm: 'gcra', limit: 100, period: '1s', burst: 100, sync: 'lease' }])
    const keys = [policyKey('l:', 'renewed', policies[0]), ledgerKey('l:', 'renewed', policies[0])]
    const leaseMs = 1000
    const start = Date.now()
    const ask = (at: number, id: number, returnId: number): LeaseRequest => ({
      key: 'renewed',
      policies,
      now: start + at,
      id,
      want: 40,
      need: 0,
      leaseMs,
      returnId,
      returnUnused: 10,
    })
    const [first] = await store.lease([ask(0, 1, 0)])
    assert.equal(first.granted, 40)
    const expirySets = async () => (await calls(client, 'pexpireat')) + (await calls(client, 'set'))
    const before = await expirySets()
    const renewals = 8
    for (let k = 1; k <= renewals; k++) {
      // Renewed when 100 ms of the lease are left, as the sweep does.
      const [renewed] = await store.lease([ask(k * (leaseMs - 100), k + 1, k)])
      assert.equal(renewed.returned, true)
      assert.equal(renewed.granted, 40)
      for (const key of keys) {
        // Each key lives past the lease it holds and the bucket's settling time (1 s here).
        assert.ok((await client.pexpiretime(key)) >= renewed.expiresAt + 1000, `${key} outlives its lease`)
      }
    }
    // Unpadded, every renewal would set both keys a new expiry (16); padded, 4 lease times, at
    // most one in three renewals does.
    assert.ok((await expirySets()) - before <= 6, `${(await expirySets()) - before} expiries set in ${renewals} renewals`)
    assert.deepEqual((await readRecord(client, keys[1]))?.state, [renewals + 1, start + renewals * (leaseMs - 100) + leaseMs, 40])
  } finally {
    await store.close()
    client.disconnect()
    await server.stop()
  }
})
