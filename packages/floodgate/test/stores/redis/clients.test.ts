// RedisStore with every client family it accepts by shape (ioredis 6, ioredis 5, node-redis), on a
// standalone server and on a real Cluster: decisions, all-or-nothing, NOSCRIPT reload, reset, close.

import { after, before, describe, test } from 'node:test'
import { once } from 'node:events'
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { execFileSync } from 'node:child_process'
import { Redis as Redis6, Cluster as Cluster6 } from 'ioredis'
import { Redis as Redis5, Cluster as Cluster5 } from 'ioredis5'
import { createClient as createNodeRedis, createCluster as createNodeRedisCluster } from 'redis'
import { createPolicies } from '../../../src/core/policy.js'
import { FloodgateError } from '../../../src/core/errors.js'
import { RedisStore } from '../../../src/redis.js'
import type { RedisClientLike } from '../../../src/stores/redis/connection.js'
import { createClient } from '../../../src/stores/redis/create-client.js'
import { toConnection } from '../../../src/stores/redis/connection.js'
import { readRecord } from './records.js'
import { startRedis, type RedisProcess } from '../../support/redis-server.js'
import { startCluster, type RedisClusterHandle } from '../../support/redis-cluster.js'
import { policyId } from '../../../src/stores/redis/keys.js'

const perMinute = createPolicies([{ name: 'minute', algorithm: 'fixed-window', limit: 3, period: '1m' }])
const pair = createPolicies([
  { name: 'short', algorithm: 'fixed-window', limit: 5, period: '1m' },
  { name: 'long', algorithm: 'fixed-window', limit: 2, period: '1h' },
])

interface ClientKind {
  readonly name: string
  /** A connected client of this kind, and how to end it. */
  make(): Promise<{ client: RedisClientLike; end(): Promise<void> }>
}

function standaloneKinds(server: () => RedisProcess): ClientKind[] {
  return [
    {
      name: 'ioredis 6 Redis',
      async make() {
        const client = new Redis6(server().port, server().host)
        return { client, end: async () => void client.disconnect() }
      },
    },
    {
      name: 'ioredis 5 Redis',
      async make() {
        const client = new Redis5(server().port, server().host)
        return { client, end: async () => void client.disconnect() }
      },
    },
    // Auto-pipelining routes every command through a pipeline flushed on the next tick; the store's
    // call once reached it in a form whose flush threw outside any promise (an uncaught exception).
    {
      name: 'ioredis 6 Redis with enableAutoPipelining',
      async make() {
        const client = new Redis6(server().port, server().host, { enableAutoPipelining: true })
        return { client, end: async () => void client.disconnect() }
      },
    },
    {
      name: 'ioredis 5 Redis with enableAutoPipelining',
      async make() {
        const client = new Redis5(server().port, server().host, { enableAutoPipelining: true })
        return { client, end: async () => void client.disconnect() }
      },
    },
    {
      name: 'node-redis createClient',
      async make() {
        const client = createNodeRedis({ url: server().url })
        client.on('error', () => {})
        await client.connect()
        return { client, end: async () => void client.destroy() }
      },
    },
  ]
}

function clusterKinds(cluster: () => RedisClusterHandle): ClientKind[] {
  return [
    {
      name: 'ioredis 6 Cluster',
      async make() {
        const client = new Cluster6([...cluster().startupNodes])
        return { client, end: async () => void client.disconnect() }
      },
    },
    {
      name: 'ioredis 5 Cluster',
      async make() {
        const client = new Cluster5([...cluster().startupNodes])
        return { client, end: async () => void client.disconnect() }
      },
    },
    {
      name: 'ioredis 6 Cluster with enableAutoPipelining',
      async make() {
        const client = new Cluster6([...cluster().startupNodes], { enableAutoPipelining: true })
        return { client, end: async () => void client.disconnect() }
      },
    },
    {
      name: 'node-redis createCluster',
      async make() {
        const client = createNodeRedisCluster({ rootNodes: cluster().startupNodes.map(({ host, port }) => ({ socket: { host, port } })) })
        client.on('error', () => {})
        await client.connect()
        return { client, end: async () => void client.destroy() }
      },
    },
  ]
}

/** Keys spread over many slots (every master of a Cluster), each with its own hash tag. */
const KEYS = Array.from({ length: 24 }, (_, i) => `user:${i}`)

// The smoke every client kind must pass; `admin` reads and flushes what the store wrote.
function smoke(
  kind: ClientKind,
  admin: () => { flushScripts(): Promise<void>; flushAll(): Promise<void>; record(key: string): Promise<unknown> },
): void {
  describe(kind.name, () => {
    let made: Awaited<ReturnType<ClientKind['make']>>
    let store: RedisStore
    before(async () => {
      await admin().flushAll()
      made = await kind.make()
      store = new RedisStore({ client: made.client, prefix: 'smoke:' })
    })
    after(async () => {
      await store.close()
      await made.end()
    })

    test('decides: charges up to the limit, then denies, for keys on every server', async () => {
      const answers = await Promise.all(
        KEYS.flatMap((key) =>
          [1, 2, 3, 4].map(() => store.evaluate([{ key, policies: perMinute, cost: 1, now: 60_000 }]).then(([r]) => r)),
        ),
      )
      for (let k = 0; k < KEYS.length; k++) {
        const mine = answers.slice(4 * k, 4 * k + 4)
        assert.deepEqual(
          mine.map((r) => r.allowed),
          [true, true, true, false],
          KEYS[k],
        )
        assert.deepEqual(
          mine.map((r) => r.results[0].remaining),
          [2, 1, 0, 0],
          KEYS[k],
        )
      }
      assert.deepEqual(await admin().record(`smoke:{user:7}:${policyId('minute')}:fw`), { blockedUntil: 0, state: [60_000, 3] })
    })

    test('several policies are all-or-nothing: a denial by one charges none', async () => {
      const decide = () => store.evaluate([{ key: 'pair', policies: pair, cost: 1, now: 60_000 }]).then(([r]) => r)
      assert.equal((await decide()).allowed, true)
      assert.equal((await decide()).allowed, true)
      const denied = await decide()
      assert.equal(denied.allowed, false)
      assert.deepEqual(
        denied.results.map((r) => r.allowed),
        [true, false],
      )
      assert.deepEqual(
        await admin().record(`smoke:{pair}:${policyId('short')}:fw`),
        { blockedUntil: 0, state: [60_000, 2] },
        'the short window kept 2, not 3',
      )
    })

    test('after SCRIPT FLUSH the script is sent again (NOSCRIPT) and every call counts once', async () => {
      await admin().flushScripts()
      const answers = await Promise.all(
        [1, 2].map(() => store.evaluate([{ key: 'reload', policies: perMinute, cost: 1, now: 60_000 }]).then(([r]) => r)),
      )
      assert.deepEqual(
        answers.map((r) => r.results[0].remaining),
        [2, 1],
      )
    })

    test('reset deletes the key; close leaves a given client open and usable', async () => {
      await store.reset('user:7', perMinute)
      assert.equal(await admin().record(`smoke:{user:7}:${policyId('minute')}:fw`), null)
      await store.close()
      const again = new RedisStore({ client: made.client, prefix: 'smoke:' })
      const [response] = await again.evaluate([{ key: 'user:7', policies: perMinute, cost: 1, now: 60_000 }])
      assert.equal(response.results[0].remaining, 2)
      await again.close()
      store = new RedisStore({ client: made.client, prefix: 'smoke:' })
    })
  })
}

describe('on a standalone Redis', () => {
  let server: RedisProcess
  let admin: Redis6
  before(async () => {
    server = await startRedis()
    admin = new Redis6(server.port, server.host)
  })
  after(async () => {
    admin.disconnect()
    await server.stop()
  })
  const adminOps = () => ({
    flushScripts: async () => void (await admin.script('FLUSH')),
    flushAll: async () => void (await admin.flushall()),
    record: (key: string) => readRecord(admin, key),
  })
  for (const kind of standaloneKinds(() => server)) smoke(kind, adminOps)

  test('a store given a node-redis client never loads ioredis', () => {
    // A fresh process: this one has loaded ioredis for the other tests.
    const program = `
      import { createRequire } from 'node:module'
      import { createClient } from 'redis'
      import { createPolicies } from 'floodgate'
      import { RedisStore } from 'floodgate/redis'
      const client = createClient({ url: process.env.REDIS_URL })
      await client.connect()
      const store = new RedisStore({ client })
      const policies = createPolicies([{ algorithm: 'gcra', limit: 5, period: '1m' }])
      const [answer] = await store.evaluate([{ key: 'k', policies, cost: 1 }])
      await store.close()
      await client.close()
      const loaded = Object.keys(createRequire(import.meta.url).cache).filter((path) => path.includes('/node_modules/ioredis'))
      console.log(JSON.stringify({ remaining: answer.results[0].remaining, loaded }))
    `
    const output = execFileSync(
      process.execPath,
      ['--conditions=floodgate-source', '--import', 'tsx', '--input-type=module', '-e', program],
      {
        env: { ...process.env, REDIS_URL: server.url },
        encoding: 'utf8',
      },
    )
    assert.deepEqual(JSON.parse(output), { remaining: 4, loaded: [] })
  })

  test('node-redis: a restarted server is refused while down, announced when back, and used again', async () => {
    const own = await startRedis()
    const client = createNodeRedis({ url: own.url, socket: { reconnectStrategy: () => 50 } })
    client.on('error', () => {})
    await client.connect()
    const store = new RedisStore({ client, prefix: 'restart:' })
    try {
      await store.evaluate([{ key: 'k', policies: perMinute, cost: 1, now: 0 }])
      const down = once(store, 'unavailable')
      await own.stop()
      await down
      await assert.rejects(
        store.evaluate([{ key: 'k', policies: perMinute, cost: 1, now: 0 }]),
        (error: unknown) => error instanceof FloodgateError && error.code === 'STORE_UNAVAILABLE',
      )
      const up = once(store, 'available')
      await own.restart()
      await up
      const [response] = await store.evaluate([{ key: 'k', policies: perMinute, cost: 1, now: 0 }])
      assert.equal(response.results[0].remaining, 2, 'the restarted server starts empty; the refused call was never sent')
    } finally {
      await store.close()
      client.destroy()
      await own.stop()
    }
  })

  const makers: [string, () => Redis6 | Redis5][] = [
    ['ioredis 6', () => new Redis6(server.port, server.host)],
    ['ioredis 5', () => new Redis5(server.port, server.host)],
    // Auto-pipelining holds every command for the next tick; the store's calls must bypass it.
    ['ioredis 6 with enableAutoPipelining', () => new Redis6(server.port, server.host, { enableAutoPipelining: true })],
    ['ioredis 5 with enableAutoPipelining', () => new Redis5(server.port, server.host, { enableAutoPipelining: true })],
  ]
  for (const [name, make] of makers) {
    test(`${name}: a script call is written to the socket at once, not on a later tick`, async () => {
      const client = make()
      try {
        await client.ping()
        const connection = toConnection(client)
        const queued = client.commandQueue.length
        const reply = connection.evalBuffer('eval', 'return ARGV[1]', [], ['written'])
        // ioredis queues a command for its reply as it writes it to the socket.
        assert.equal(client.commandQueue.length, queued + 1)
        assert.deepEqual(await reply, Buffer.from('written'))
      } finally {
        client.disconnect()
      }
    })
  }

  test('a store made from a URL owns its client (node-redis when ioredis is missing) and closes it', async () => {
    const client = createClient({ url: server.url }, 'url', (name) =>
      name === 'ioredis' ? undefined : createRequire(import.meta.url)('redis'),
    )
    const store = new RedisStore({ client, prefix: 'created:' })
    const [response] = await store.evaluate([{ key: 'k', policies: perMinute, cost: 1, now: 0 }])
    assert.equal(response.results[0].remaining, 2)
    assert.equal(typeof (client as { isReady?: unknown }).isReady, 'boolean', 'made by node-redis')
    await store.close()
    await (client as ReturnType<typeof createNodeRedis>).close()
    const owned = new RedisStore({ url: server.url, prefix: 'created:' })
    await owned.evaluate([{ key: 'k', policies: perMinute, cost: 1, now: 0 }])
    await owned.close()
    assert.equal((owned.client as Redis6).status, 'end', 'the app has ioredis: the store made and closed an ioredis client')
  })
})

describe('on a Redis Cluster', () => {
  let cluster: RedisClusterHandle
  let admin: Cluster6
  before(async () => {
    cluster = await startCluster({ masters: 3, replicasPerMaster: 0, nodeTimeoutMs: 5000 })
    admin = new Cluster6([...cluster.startupNodes])
  })
  after(async () => {
    admin.disconnect()
    await cluster.stop()
  })
  const adminOps = () => ({
    flushScripts: async () => void (await Promise.all(admin.nodes('master').map((node) => node.script('FLUSH')))),
    flushAll: async () => void (await Promise.all(admin.nodes('master').map((node) => node.flushall()))),
    record: (key: string) => readRecord(admin, key),
  })
  for (const kind of clusterKinds(() => cluster)) smoke(kind, adminOps)
})

test('with neither client library installed, a store that must create its client says what to install', () => {
  assert.throws(
    () => createClient({ url: 'redis://127.0.0.1:1' }, 'url', () => undefined),
    (error: unknown) =>
      error instanceof FloodgateError &&
      error.code === 'INVALID_OPTION' &&
      error.message === 'RedisStore url: install a Redis client: npm i ioredis (or pass { client } made with the redis package)',
  )
})

test('a client of neither family is refused with INVALID_OPTION naming both', () => {
  assert.throws(
    () => new RedisStore({ client: { status: 'ready' } as unknown as RedisClientLike }),
    (error: unknown) =>
      error instanceof FloodgateError &&
      error.code === 'INVALID_OPTION' &&
      /ioredis Redis or Cluster, or a client from the redis package/.test(error.message),
  )
})
