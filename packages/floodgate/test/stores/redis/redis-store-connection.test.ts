// RedisStore on a real redis-server: its connection, outages, Sentinel and Cluster topologies.

import { test, beforeEach } from 'node:test'
import { once } from 'node:events'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Cluster, Redis } from 'ioredis'
import { createPolicies } from '../../../src/core/policy.js'
import { FloodgateError } from '../../../src/core/errors.js'
import { RedisStore } from '../../../src/redis.js'
import { policyId, policyKey } from '../../../src/stores/redis/keys.js'
import { keySlot } from '../../../src/stores/redis/slot.js'
import { STALL_MS } from '../../../src/stores/redis/lane.js'
import { readRecord } from './records.js'
import { freePort, startRedis, type RedisProcess } from '../../support/redis-server.js'
import { startCluster } from '../../support/redis-cluster.js'
import { useRedisStore } from '../../support/redis-store.js'

const redis = useRedisStore()

beforeEach(async () => {
  await redis.client.flushdb()
})

const perMinute = createPolicies([{ name: 'minute', algorithm: 'fixed-window', limit: 10, period: '1m' }])

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
