// RedisStore over a Sentinel-managed master (ioredis `{ sentinels, name }`): correct decisions, and
// after a Sentinel failover the promoted replica keeps deciding with the same state.

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { Redis } from 'ioredis'
import { createPolicies } from '../../../src/core/policy.js'
import { RedisStore } from '../../../src/redis.js'
import { policyKey } from '../../../src/stores/redis/keys.js'
import type { EvaluateResponse } from '../../../src/stores/store.js'
import { startSentinel, type SentinelSetup } from '../../support/redis-sentinel.js'

const NOW = Date.UTC(2026, 0, 1, 10, 0)
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

let setup: SentinelSetup
let client: Redis
let store: RedisStore

before(async () => {
  setup = await startSentinel()
  client = new Redis({ sentinels: [...setup.sentinels], name: setup.name })
  client.on('error', () => {})
  store = new RedisStore({ client })
})

after(async () => {
  await store?.close()
  client?.disconnect()
  await setup?.stop()
})

test('decides through the master the sentinel names, all-or-nothing across policies', async () => {
  const policies = createPolicies([
    { name: 'five', algorithm: 'fixed-window', limit: 5, period: '1h' },
    { name: 'eight', algorithm: 'gcra', limit: 8, period: '1h' },
  ])
  const decisions: EvaluateResponse[] = []
  for (let i = 0; i < 7; i++) decisions.push(...(await store.evaluate([{ key: 'sentinel-user', policies, cost: 1, now: NOW }])))
  assert.deepEqual(
    decisions.map((d) => d.allowed),
    [true, true, true, true, true, false, false],
  )
  assert.deepEqual(
    decisions[4].results.map((r) => r.remaining),
    [0, 3],
  )
  // The denials charged nothing: the gcra policy still has 3 left.
  const [peek] = await store.evaluate([{ key: 'sentinel-user', policies, cost: 0, now: NOW }])
  assert.equal(peek.results[1].remaining, 3)
  assert.equal(await setup.currentMasterPort(), setup.master.port)
  const stored = await onNode(setup.master.port, (redis) => redis.dbsize())
  assert.equal(stored, 2, 'both policy records live on the master')
})

test('after a Sentinel failover the promoted replica decides, with the replicated state', async () => {
  const policies = createPolicies([{ algorithm: 'fixed-window', limit: 3, period: '1h' }])
  const first = await store.evaluate([1, 2, 3].map(() => ({ key: 'failover-user', policies, cost: 1, now: NOW })))
  assert.deepEqual(
    first.map((d) => d.allowed),
    [true, true, true],
  )
  await waitUntil('the replica to catch up with the master', 10_000, async () => {
    const offset = async (port: number): Promise<string | undefined> =>
      onNode(port, async (redis) => /master_repl_offset:(\d+)/.exec(await redis.info('replication'))?.[1])
    return (await offset(setup.master.port)) === (await offset(setup.replica.port))
  })

  await onNode(setup.sentinels[0].port, (redis) => redis.call('SENTINEL', 'FAILOVER', setup.name))
  await waitUntil(
    'the sentinel to name the replica as master',
    20_000,
    async () => (await setup.currentMasterPort()) === setup.replica.port,
  )
  // Until the old master is demoted too it still takes writes (Sentinel's split-brain window).
  await waitUntil('the old master to become a replica', 20_000, async () =>
    onNode(setup.master.port, async (redis) => /role:slave/.test(await redis.info('replication'))),
  )

  // The client finds the new master by itself; until it does, calls may fail (bounded).
  let decision: EvaluateResponse | undefined
  await waitUntil('a decision from the new master', 20_000, async () => {
    ;[decision] = await store.evaluate([{ key: 'failover-user', policies, cost: 1, now: NOW }])
    return true
  })
  assert.equal(decision?.allowed, false, 'the three charges made before the failover were kept')
  const [other] = await store.evaluate([{ key: 'failover-other', policies, cost: 1, now: NOW }])
  assert.equal(other.allowed, true)
  assert.equal(await onNode(setup.replica.port, (redis) => redis.exists(policyKey(store.prefix, 'failover-other', policies[0]))), 1)
})

async function waitUntil(what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs
  let last: unknown
  for (;;) {
    try {
      if (await check()) return
    } catch (error) {
      last = error
    }
    if (Date.now() > deadline) throw new Error(`gave up after ${timeoutMs}ms waiting for ${what}; last error: ${String(last)}`)
    await sleep(100)
  }
}

async function onNode<T>(port: number, work: (redis: Redis) => Promise<T>): Promise<T> {
  const redis = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 1 })
  try {
    await redis.connect()
    return await work(redis)
  } finally {
    redis.disconnect()
  }
}
