// Failure modes against a real RedisStore whose server is not there (a free port nobody listens on).

import { describe, it, after, before } from 'node:test'
import assert from 'node:assert/strict'
import { RateLimiter } from '../../src/index.js'
import { Redis } from 'ioredis'
import { RedisStore } from '../../src/redis.js'
import { freePort } from '../support/redis-server.js'

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

  it('open: allows every request and opens the breaker', async () => {
    const limiter = new RateLimiter({ store, policies, timeout: '50ms', onStoreError: 'open', breaker: { failures: 2, cooldown: '1m' } })
    let opened = 0
    limiter.on('breaker-open', () => opened++)
    const decisions = []
    for (let i = 0; i < 4; i++) decisions.push(await limiter.limit('k'))
    assert.ok(decisions.every((d) => d.allowed && d.source === 'fallback-open'))
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
    assert.deepEqual(decisions.map((d) => [d.allowed, d.source]), [
      [true, 'fallback-local'],
      [false, 'fallback-local'],
      [false, 'fallback-local'],
    ])
    await limiter.close()
  })

  it('leaves no unhandled rejection behind', async () => {
    await new Promise((resolve) => setTimeout(resolve, 200))
    assert.deepEqual(unhandled, [])
  })
})
