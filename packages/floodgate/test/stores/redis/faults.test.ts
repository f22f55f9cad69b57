// Fault tests on real Redis: a Cluster master SIGKILLed mid-run, every script flushed mid-run, and a
// standalone server stopped and restarted under each onStoreError mode with the circuit breaker.

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { Cluster, Redis } from 'ioredis'
import { RateLimiter, type Decision, type DecisionSource, type RateLimiterOptions } from '../../../src/index.js'
import type { EvaluateRequest, EvaluateResponse } from '../../../src/stores/store.js'
import { createPolicies } from '../../../src/core/policy.js'
import { RedisStore } from '../../../src/redis.js'
import { startCluster, type RedisClusterHandle } from '../../support/redis-cluster.js'
import { startRedis, type RedisProcess } from '../../support/redis-server.js'

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * Decides `key` until the store answers, for at most 20 s (a bound on a hang, not a speed test): on
 * a busy machine a first call, which connects and loads the script, may outlast a short timeout and
 * be answered by the fallback. What follows needs that state, not that speed.
 */
async function untilFromStore(limiter: RateLimiter, key: string): Promise<Decision> {
  const deadline = Date.now() + 20_000
  let decision = await limiter.limit(key)
  while (decision.source !== 'store' && Date.now() < deadline) {
    await sleep(100)
    decision = await limiter.limit(key)
  }
  return decision
}

describe('on a Redis Cluster', () => {
  let cluster: RedisClusterHandle
  let client: Cluster

  before(async () => {
    cluster = await startCluster({ masters: 3, replicasPerMaster: 1, nodeTimeoutMs: 1000 })
    client = new Cluster([...cluster.startupNodes], { scaleReads: 'master' })
  })

  after(async () => {
    client?.disconnect()
    await cluster?.stop()
  })

  test('SCRIPT FLUSH on every node mid-run: no call fails and every decision stays exact', async () => {
    const store = new RedisStore({ client, prefix: 'flush:' })
    const policies = createPolicies([{ algorithm: 'fixed-window', limit: 12, period: '1h' }])
    const now = Date.UTC(2026, 0, 1, 9, 0)
    const keys = Array.from({ length: 40 }, (_, i) => `k${i}`)
    for (let wave = 0; wave < 16; wave++) {
      if (wave % 4 === 2) await Promise.all(cluster.nodes.map((node) => onNode(node.port, (redis) => redis.script('FLUSH'))))
      // Every call is its own evaluate, as concurrent requests would be; any rejection fails the test.
      const responses = await Promise.all(keys.map((key) => store.evaluate([{ key, policies, cost: 1, now }]).then(([r]) => r)))
      for (const [i, response] of responses.entries()) {
        assert.equal(response.allowed, wave < 12, `wave ${wave} key ${keys[i]}`)
        assert.equal(response.results[0].remaining, Math.max(0, 12 - wave - 1), `wave ${wave} key ${keys[i]}`)
      }
    }
  })

  test('a master SIGKILLed mid-run: a replica takes over and decisions come from the store again', async (t) => {
    const store = new RedisStore({ client, prefix: 'kill:' })
    const limiter = new RateLimiter({
      store,
      policies: [{ algorithm: 'gcra', limit: 1_000_000, period: '1h' }],
      // Long enough that a wave of 60 on a healthy cluster is never timed out on a busy machine
      // (every wave before the kill and after the recovery must come from the store); while the
      // slot has no master, calls to it are refused or time out, and fall back.
      timeout: '2s',
      onStoreError: 'open',
      breaker: { failures: 5, cooldown: '300ms' },
    })
    const keys = Array.from({ length: 60 }, (_, i) => `user:${i}`)
    const victim = keys[0]
    const counts = new Map<DecisionSource, number>()
    const wave = async (): Promise<Decision[]> => {
      const decisions = await Promise.all(keys.map((key) => limiter.limit(key)))
      for (const d of decisions) counts.set(d.source, (counts.get(d.source) ?? 0) + 1)
      return decisions
    }

    // The first wave connects to every master and loads the script: wait for that state.
    await Promise.all(keys.map((key) => untilFromStore(limiter, key)))
    for (let i = 0; i < 5; i++) {
      const decisions = await wave()
      assert.ok(
        decisions.every((d) => d.source === 'store'),
        'before the kill every decision comes from the store',
      )
    }
    const killed = await cluster.killMaster(victim)
    const healed = cluster.waitUntilHealthy(30_000)
    let healthy = false
    void healed.then(
      () => (healthy = true),
      () => undefined,
    )

    // Keep deciding through the failover; limit() must never throw. Stop once the cluster has
    // healed and a whole wave (including the victim's slot) was decided by the store again.
    const deadline = Date.now() + 40_000
    let waves = 0
    let recovered = false
    while (Date.now() < deadline) {
      const decisions = await wave()
      waves++
      assert.ok(
        decisions.every((d) => d.allowed),
        'fail-open: nothing is denied while the store fails',
      )
      if (healthy && decisions.every((d) => d.source === 'store')) {
        recovered = true
        break
      }
      await sleep(50)
    }
    await healed
    const fallbacks = counts.get('fallback-open') ?? 0
    t.diagnostic(`killed master ${killed.port}; ${waves} waves during failover; sources: ${JSON.stringify(Object.fromEntries(counts))}`)
    assert.ok(
      recovered,
      `decisions did not come back to the store within 40s after the kill (sources ${JSON.stringify(Object.fromEntries(counts))})`,
    )
    assert.notEqual(await cluster.masterOf(victim), killed.port, 'a replica now serves the victim slot')
    assert.ok(fallbacks > 0, 'the kill was felt: some decisions fell back while the slot had no master')
    // Bounded: once back, the store keeps deciding; the fallbacks were the failover window only.
    for (let i = 0; i < 5; i++) {
      const decisions = await wave()
      assert.deepEqual(new Set(decisions.map((d) => d.source)), new Set(['store']), `wave ${i} after recovery`)
    }
  })
})

describe('on a standalone Redis that stops and comes back', () => {
  let server: RedisProcess
  let client: Redis

  before(async () => {
    server = await startRedis()
    client = new Redis({ host: server.host, port: server.port })
    client.on('error', () => {})
  })

  after(async () => {
    client?.disconnect()
    await server?.stop()
  })

  test('open allows, closed denies, local enforces limit/instances; the breaker opens; the store takes over after restart', async (t) => {
    const store = new CountingStore({ client, prefix: 'modes:' })
    const timeoutMs = 250
    const cooldownMs = 1000
    const common: RateLimiterOptions = {
      store,
      policies: [{ name: 'ten-per-hour', algorithm: 'fixed-window', limit: 10, period: '1h' }],
      timeout: `${timeoutMs}ms`,
      breaker: { failures: 3, cooldown: `${cooldownMs}ms` },
      denyCache: false,
    }
    const limiters = {
      open: new RateLimiter({ ...common, onStoreError: 'open' }),
      closed: new RateLimiter({ ...common, onStoreError: 'closed' }),
      local: new RateLimiter({ ...common, onStoreError: 'local', instances: 2 }),
    }
    for (const [mode, limiter] of Object.entries(limiters)) {
      const decision = await untilFromStore(limiter, `up-${mode}`)
      assert.equal(decision.source, 'store', `${mode} while Redis is up`)
    }
    // Only the openings after the stop: a slow first call above may have opened a breaker once.
    const openedAt = new Map<string, number>()
    for (const [mode, limiter] of Object.entries(limiters)) limiter.on('breaker-open', () => openedAt.set(mode, Date.now()))

    await server.stop()

    const expected = { open: ['fallback-open', true], closed: ['fallback-closed', false] } as const
    for (const mode of ['open', 'closed'] as const) {
      const limiter = limiters[mode]
      for (let i = 0; i < 8; i++) {
        const callsBefore = store.calls
        // Only a breaker already open before this call began must skip the store: the call that
        // opens it did reach the store, possibly within the same millisecond.
        const opened = openedAt.get(mode)
        const started = Date.now()
        const decision = await limiter.limit(`down-${mode}`)
        const elapsed = Date.now() - started
        assert.equal(decision.source, expected[mode][0], `${mode} call ${i}`)
        assert.equal(decision.allowed, expected[mode][1], `${mode} call ${i}`)
        // A hang check, not a speed test: ioredis alone would hold the call for many seconds.
        assert.ok(elapsed < timeoutMs + 4000, `${mode} call ${i} took ${elapsed}ms with a ${timeoutMs}ms timeout`)
        if (opened !== undefined && started < opened + cooldownMs) {
          assert.equal(store.calls, callsBefore, `${mode} call ${i}: the open breaker must skip the store`)
        }
      }
      assert.ok(openedAt.has(mode), `${mode}: the breaker opened after repeated failures`)
    }

    // Local: each instance gets ceil(10 / 2) = 5 of the key's 10.
    const local = await Promise.all(Array.from({ length: 8 }, () => limiters.local.limit('down-local')))
    assert.deepEqual(
      local.map((d) => d.source),
      local.map(() => 'fallback-local'),
    )
    assert.equal(local.filter((d) => d.allowed).length, 5, 'local fallback admits limit / instances')
    assert.ok(openedAt.has('local'), 'local: the breaker opened after repeated failures')

    await server.restart()
    // Back to the store by itself: no reset, no new client; bounded in time.
    for (const [mode, limiter] of Object.entries(limiters)) {
      const deadline = Date.now() + 20_000
      let decision = await limiter.limit(`back-${mode}`)
      while (decision.source !== 'store' && Date.now() < deadline) {
        await sleep(100)
        decision = await limiter.limit(`back-${mode}`)
      }
      t.diagnostic(`${mode}: back to the store, decision source ${decision.source}`)
      assert.equal(decision.source, 'store', `${mode}: decisions go back to the store after restart`)
      assert.equal(decision.allowed, true)
    }
  })
})

describe('a call answered by the fallback while Redis is down', () => {
  let server: RedisProcess
  let client: Redis

  before(async () => {
    server = await startRedis()
    // The default ioredis client: offline queue on, unanswered commands resent after reconnecting.
    client = new Redis({ host: server.host, port: server.port })
    client.on('error', () => {})
  })

  after(async () => {
    client?.disconnect()
    await server?.stop()
  })

  // ioredis queues commands while disconnected and replays them after reconnecting; RedisStore's
  // connection gate refuses instead, so requests the fallback answered are never charged later.
  test('is not charged in Redis later, when the server is back', async () => {
    const limiter = new RateLimiter({
      store: new RedisStore({ client, prefix: 'late:' }),
      policies: [{ name: 'ten-per-hour', algorithm: 'fixed-window', limit: 10, period: '1h' }],
      timeout: '200ms',
      onStoreError: 'open',
      breaker: { failures: 100 },
      denyCache: false,
    })
    assert.equal((await untilFromStore(limiter, 'warm-up')).source, 'store')
    await server.stop()
    for (let i = 0; i < 5; i++) assert.equal((await limiter.limit('late')).source, 'fallback-open')
    await server.restart()
    let peek = await limiter.limit('late', { cost: 0 })
    for (const deadline = Date.now() + 20_000; peek.source !== 'store' && Date.now() < deadline; ) {
      await sleep(100)
      peek = await limiter.limit('late', { cost: 0 })
    }
    assert.equal(peek.source, 'store')
    // Give queued commands their chance to land, then look: nothing may have been charged.
    await sleep(500)
    const settled = await limiter.limit('late', { cost: 0 })
    assert.equal(settled.remaining, 10, `${10 - settled.remaining} fallback-answered calls were charged after the restart`)
  })
})

/** A real RedisStore that also counts how often the limiter asked it to decide. */
class CountingStore extends RedisStore {
  calls = 0

  override evaluate(batch: readonly EvaluateRequest[]): Promise<EvaluateResponse[]> {
    this.calls++
    return super.evaluate(batch)
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
