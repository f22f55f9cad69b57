// A merge's idempotency token (merge-runner.lua: one per slot and origin per call, holding the seqs
// applied there): a resend whose first answer was lost counts once, however the resend is grouped
// into calls, and on a Cluster also when the slot moved to another master in between; the token
// expires with the records it guards.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { Cluster, Redis } from 'ioredis'
import { createPolicies } from '../../../src/core/policy.js'
import { RedisStore } from '../../../src/redis.js'
import type { MergeRequest } from '../../../src/stores/store.js'
import { keySlot } from '../../../src/stores/redis/slot.js'
import { tokenPrefix } from '../../../src/stores/redis/slot-tags.js'
import { useRedis } from '../../support/redis-store.js'
import { startCluster, type RedisClusterHandle } from '../../support/redis-cluster.js'

// A day's window: no run straddles its end.
const policies = createPolicies([{ algorithm: 'fixed-window', limit: 1_000, period: '1d', sync: 'write-back' }])
const ORIGIN = 'wb-test'

const request = (key: string, seq: number): MergeRequest => ({ key, policies, units: 5, origin: ORIGIN, seq })

async function counts(store: RedisStore, keys: readonly string[]): Promise<number[]> {
  const answers = await store.merge(keys.map((key) => ({ key, policies, units: 0 })))
  return answers.map((answer) => answer.records[0].state?.[1] ?? 0)
}

// A token's runs: (first seq, last seq, kept until) as little-endian doubles.
function runs(token: Buffer | null): number[][] {
  const out: number[][] = []
  for (let at = 0; token !== null && at < token.length; at += 24) {
    out.push([token.readDoubleLE(at), token.readDoubleLE(at + 8), token.readDoubleLE(at + 16)])
  }
  return out
}

describe('merge token on one redis-server', () => {
  const redis = useRedis()

  it('a lost answer, then a resend regrouped into other calls with new requests: each request counted once', async () => {
    const store = new RedisStore({ url: redis.server.url, prefix: 's:' })
    try {
      // The first send is applied by the server; its answer never reaches the sender.
      void (await store.merge(['a', 'b', 'c', 'd'].map((key, i) => request(key, i + 1))))
      // The sender sends it again with the same seqs, in another order and other calls, beside new units.
      const [first, second] = await Promise.all([
        store.merge([request('c', 3), request('e', 5), request('a', 1)]),
        store.merge([request('b', 2), request('d', 4), request('f', 6)]),
      ])
      assert.deepEqual(
        first.map((answer) => answer.applied),
        [false, true, false],
      )
      assert.deepEqual(
        second.map((answer) => answer.applied),
        [false, false, true],
      )
      assert.deepEqual(await counts(store, ['a', 'b', 'c', 'd', 'e', 'f']), [5, 5, 5, 5, 5, 5])
      // One token for the origin, whose runs joined into one; it expires no earlier than the records
      // it guards and no later than the latest of them (bounded memory).
      const name = `${tokenPrefix('s:', -1)}${ORIGIN}`
      const token = await redis.admin.getBuffer(name)
      assert.deepEqual(
        runs(token).map(([from, to]) => [from, to]),
        [[1, 6]],
      )
      const tokenTtl = await redis.admin.pttl(name)
      const recordTtls = await Promise.all((await redis.admin.keys('s:{*')).map((key) => redis.admin.pttl(key)))
      assert.equal(recordTtls.length, 6)
      assert.ok(tokenTtl > 0 && tokenTtl >= Math.max(...recordTtls) - 50, `token pttl ${tokenTtl}, records' ${recordTtls}`)
      assert.ok(tokenTtl <= Math.max(...recordTtls) + 50, `token pttl ${tokenTtl}, records' ${recordTtls}`)
    } finally {
      await store.close()
    }
  })

  it('a token forgets runs whose records expired, and goes with its last one', async () => {
    const store = new RedisStore({ url: redis.server.url, prefix: 'x:' })
    const short = createPolicies([{ name: 'short', algorithm: 'fixed-window', limit: 10, period: '1s', sync: 'write-back' }])
    try {
      const name = `${tokenPrefix('x:', -1)}${ORIGIN}`
      // A run kept until long past (another program's, or one whose records expired) is dropped on the next write.
      const past = Buffer.alloc(24)
      past.writeDoubleLE(100, 0)
      past.writeDoubleLE(200, 8)
      past.writeDoubleLE(1, 16)
      await redis.admin.set(name, past)
      const [answer] = await store.merge([{ key: 'k', policies: short, units: 1, origin: ORIGIN, seq: 150 }])
      assert.equal(answer.applied, true, 'an expired run no longer stands for its seqs')
      assert.deepEqual(
        runs(await redis.admin.getBuffer(name)).map(([from, to]) => [from, to]),
        [[150, 150]],
      )
      const ttl = await redis.admin.pttl(name)
      assert.ok(ttl > 0 && ttl <= 3_000, `a token of 1 s records expires within seconds (pttl ${ttl})`)
    } finally {
      await store.close()
    }
  })
})

describe('merge token on a Redis Cluster resharded between a lost answer and its resend', () => {
  let cluster: RedisClusterHandle
  before(async () => {
    cluster = await startCluster({ masters: 3, replicasPerMaster: 0, nodeTimeoutMs: 5000 })
  })
  after(async () => {
    await cluster?.stop()
  })

  it('the token moves with its slot, so the resend counts once on the new master', async () => {
    // Three user keys in one slot (their records share it with the token), and one elsewhere.
    const slotOf = (key: string) => keySlot(`{${key}}`)
    const slot = slotOf('u0')
    const same = ['u0']
    for (let i = 1; same.length < 3; i++) if (slotOf(`u${i}`) === slot) same.push(`u${i}`)
    const keys = [...same, 'elsewhere']
    const client = new Cluster([...cluster.startupNodes], { scaleReads: 'master' })
    const store = new RedisStore({ client, prefix: 'c:' })
    const admins: Redis[] = []
    try {
      const sent = keys.map((key, i) => request(key, i + 1))
      void (await store.merge(sent)) // applied; the answer is lost
      const name = `${tokenPrefix('c:', slot)}${ORIGIN}`
      assert.equal(keySlot(name), slot, 'the token is in the slot of the keys it guards')

      // Reshard: move the slot, with every key in it, to another master (what redis-cli --cluster reshard does).
      const fromPort = await cluster.masterOf(slot)
      for (const node of cluster.nodes) admins.push(new Redis(node.port, node.host))
      const roles = await Promise.all(admins.map((admin) => admin.role()))
      const at = cluster.nodes.findIndex((node, i) => roles[i][0] === 'master' && node.port !== fromPort)
      const to = cluster.nodes[at]
      const source = admins[cluster.nodes.findIndex((node) => node.port === fromPort)]
      const target = admins[at]
      const sourceId = String(await source.call('CLUSTER', 'MYID'))
      const targetId = String(await target.call('CLUSTER', 'MYID'))
      await target.call('CLUSTER', 'SETSLOT', String(slot), 'IMPORTING', sourceId)
      await source.call('CLUSTER', 'SETSLOT', String(slot), 'MIGRATING', targetId)
      const moving = (await source.call('CLUSTER', 'GETKEYSINSLOT', String(slot), '1000')) as string[]
      assert.ok(moving.includes(name), `the token moves with the slot's keys (${moving.join(', ')})`)
      await source.call('MIGRATE', to.host, String(to.port), '', '0', '5000', 'KEYS', ...moving)
      for (const admin of admins) await admin.call('CLUSTER', 'SETSLOT', String(slot), 'NODE', targetId)
      assert.equal(await target.exists(name), 1)

      // The resend: the same seqs, another order, beside a new request of that slot.
      const extra = ['u-new']
      for (let i = 0; slotOf(extra[0]) !== slot; i++) extra[0] = `n${i}`
      const answers = await store.merge([...sent].reverse().concat(request(extra[0], 9)))
      assert.deepEqual(
        answers.map((answer) => answer.applied),
        [false, false, false, false, true],
      )
      assert.deepEqual(await counts(store, [...keys, extra[0]]), [5, 5, 5, 5, 5])
    } finally {
      for (const admin of admins) admin.disconnect()
      client.disconnect()
    }
  })
})
