// Failure modes against a real RedisStore whose server is not there (a free port nobody listens on),
// and the way back: a restarted server, a Cluster master failed over.

import { describe, it, after, before } from 'node:test'
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { RateLimiter } from '../../src/index.js'
import { Redis } from 'ioredis'
import { RedisStore } from '../../src/redis.js'
import { freePort, startRedis } from '../support/redis-server.js'
import { startCluster } from '../support/redis-cluster.js'
import { createCluster as createNodeRedisCluster } from 'redis'

describe('RateLimiter on a RedisStore that cannot connect', () => {
  let client: Redis
  let store: RedisStore
  const unhandled: unknown[] = []
  const onUnhandled = (reason: unknown) => unhandled.push(reason)

  before(async () => {
    process.on('unhandledRejection', onUnhandled)
    const port = await freePort()
    client = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1, retryStrategy: () => 50, lazyConnect: false })
    client.on('error', () => {})
    store = new RedisStore({ client })
  })

  after(async () => {
    await store.close()
    // The client was never connected: disconnect stops its reconnect loop at once.
    client.disconnect()
    process.off('unhandledRejection', onUnhandled)
  })

  const policies = [{ name: 'minute', algorithm: 'fixed-window' as const, limit: 2, period: '1m' as const }]

  it('open: allows up to the limit per window (its ceiling) and opens the breaker', async () => {
    const limiter = new RateLimiter({ store, policies, timeout: '50ms', onStoreError: 'open', breaker: { failures: 2, cooldown: '1m' } })
    let opened = 0
    limiter.on('breaker-open', () => opened++)
    const decisions = []
    for (let i = 0; i < 4; i++) decisions.push(await limiter.limit('k'))
    assert.ok(decisions.every((d) => d.source === 'fallback-open'))
    assert.deepEqual(
      decisions.map((d) => d.allowed),
      [true, true, false, false],
    )
    assert.equal(opened, 1)
  })

  it('closed: denies', async () => {
    const limiter = new RateLimiter({ store, policies, timeout: '50ms', onStoreError: 'closed' })
    const decision = await limiter.limit('k')
    assert.equal(decision.allowed, false)
    assert.equal(decision.source, 'fallback-closed')
    assert.ok(decision.retryAfterMs > 0)
  })

  it('local: enforces the limit divided by the instance count in-process', async () => {
    const limiter = new RateLimiter({ store, policies, timeout: '50ms', onStoreError: 'local', instances: 2 })
    const decisions = []
    for (let i = 0; i < 3; i++) decisions.push(await limiter.limit('k'))
    assert.deepEqual(
      decisions.map((d) => [d.allowed, d.source]),
      [
        [true, 'fallback-local'],
        [false, 'fallback-local'],
        [false, 'fallback-local'],
      ],
    )
    await limiter.close()
  })

  it('leaves no unhandled rejection behind', async () => {
    await new Promise((resolve) => setTimeout(resolve, 200))
    assert.deepEqual(unhandled, [])
  })
})

// The limiter's clock is frozen in these tests, so its breaker's one-hour cooldown never passes:
// only the store's word that Redis answers again can bring decisions back to it.
describe('RateLimiter back on Redis as soon as it answers again', () => {
  const policies = [{ name: 'minute', algorithm: 'fixed-window' as const, limit: 1_000, period: '1m' as const }]
  const frozen = () => 1_000_000

  it('a restarted server: the first call after the store reconnected probes, not waiting for the cooldown', async () => {
    const server = await startRedis()
    const store = new RedisStore({ url: server.url })
    const limiter = new RateLimiter({
      store,
      policies,
      timeout: '2s',
      onStoreError: 'open',
      breaker: { failures: 1, cooldown: '1h' },
      clock: frozen,
    })
    let closes = 0
    limiter.on('breaker-close', () => closes++)
    try {
      assert.equal((await limiter.limit('k')).source, 'store')
      const unavailable = once(store, 'unavailable')
      await server.stop()
      await unavailable
      assert.equal((await limiter.limit('k')).source, 'fallback-open', 'refused at once: the breaker opens')
      assert.equal((await limiter.limit('k')).source, 'fallback-open', 'the breaker is open')
      const available = once(store, 'available')
      await server.restart()
      await available
      assert.equal((await limiter.limit('k')).source, 'store')
      assert.equal(closes, 1)
    } finally {
      await limiter.close()
      await store.close()
      await server.stop()
    }
  })

  it('a hung server (SIGSTOP) that resumes: its first late answer lets the next call probe', async () => {
    const server = await startRedis()
    const store = new RedisStore({ url: server.url })
    const limiter = new RateLimiter({
      store,
      policies,
      timeout: '2s',
      onStoreError: 'open',
      breaker: { failures: 1, cooldown: '1h' },
      clock: frozen,
    })
    try {
      assert.equal((await limiter.limit('k')).source, 'store')
      await server.pause()
      assert.equal((await limiter.limit('k')).source, 'fallback-open', 'timed out: the breaker opens')
      const available = once(store, 'available')
      server.resume()
      await available
      assert.equal((await limiter.limit('k')).source, 'store')
    } finally {
      server.resume()
      await limiter.close()
      await store.close()
      await server.stop()
    }
  })

  const clusterClients: [string, (nodes: { host: string; port: number }[]) => Promise<{ store: RedisStore; end(): Promise<void> }>][] = [
    ['ioredis (created by the store)', async (nodes) => ({ store: new RedisStore({ cluster: nodes }), end: async () => {} })],
    [
      'node-redis createCluster',
      async (nodes) => {
        const client = createNodeRedisCluster({ rootNodes: nodes.map(({ host, port }) => ({ socket: { host, port } })) })
        client.on('error', () => {})
        await client.connect()
        return { store: new RedisStore({ client }), end: async () => client.destroy() }
      },
    ],
  ]
  for (const [name, connect] of clusterClients) {
    it(`a Cluster master failed over (${name}): the store reads the slot map again and the probe goes to the new master`, async (t) => {
      const cluster = await startCluster({ masters: 3, replicasPerMaster: 1, nodeTimeoutMs: 1000 })
      const { store, end } = await connect([...cluster.startupNodes])
      const limiter = new RateLimiter({
        store,
        policies,
        timeout: '2s',
        onStoreError: 'open',
        breaker: { failures: 1, cooldown: '1h' },
        clock: frozen,
      })
      // What the store and the limiter told, so that a probe that fails names why.
      const told: string[] = []
      const at = () => `${Math.round(performance.now())} ms`
      limiter.on('store-error', (error: Error) => told.push(`${at()} store-error: ${error.message}`))
      store.on('unavailable', (error, shard) => told.push(`${at()} unavailable ${shard}: ${error.message}`))
      store.on('available', (shard) => told.push(`${at()} available ${shard}`))
      try {
        assert.equal((await limiter.limit('victim')).source, 'store')
        const killed = await cluster.killMaster('victim')
        const available = once(store, 'available')
        // The first call goes to the dead master and fails or times out; the breaker opens and skips the rest.
        assert.equal((await limiter.limit('victim')).source, 'fallback-open')
        await available
        const startedAt = performance.now()
        const decision = await limiter.limit('victim')
        t.diagnostic(`new master answered ${Math.round(performance.now() - startedAt)} ms after the slot map changed`)
        assert.equal(decision.source, 'store', `the probe was not answered by the store; events:\n${told.join('\n')}`)
        // The node asked may learn of the promotion a little after the client did.
        await cluster.waitUntilHealthy()
        assert.notEqual(await cluster.masterOf('victim'), killed.port)
      } finally {
        await limiter.close()
        await store.close()
        await end()
        await cluster.stop()
      }
    })
  }
})
