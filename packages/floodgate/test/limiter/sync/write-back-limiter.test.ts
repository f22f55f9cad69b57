// sync: 'write-back' through the RateLimiter: decisions say `source: 'write-back'`, refunds and resets
// reach the store, close() flushes, and what write-back refuses falls to the failure mode.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { RateLimiter } from '../../../src/index.js'
import { MemoryStore } from '../../../src/stores/memory/memory-store.js'
import { RedisStore } from '../../../src/redis.js'
import { createPolicies, type PolicyOptions } from '../../../src/core/policy.js'
import type { Store } from '../../../src/stores/store.js'
import { startRedis } from '../../support/redis-server.js'
import { SimTime, settle } from './support.js'

const START = 1_700_000_000_000
const policy: PolicyOptions = { name: 'wb', algorithm: 'fixed-window', limit: 5, period: '1h', sync: 'write-back', flushMs: 50 }

function setup(options: { store?: Store; maxKeys?: number } = {}) {
  const time = new SimTime(START)
  const store = (options.store ?? new MemoryStore({ clock: time.clock })) as MemoryStore
  const limiter = new RateLimiter({
    store,
    policies: [policy],
    clock: time.clock,
    timers: { now: () => time.now, setTimeout: (callback, ms) => time.setTimeout(callback, ms) },
    denyCache: false,
  })
  const stored = () => store.evaluateSync({ key: 'k', policies: createPolicies([policy]), cost: 0 }).results[0].remaining
  return { time, store, limiter, stored }
}

describe("sync: 'write-back' in the RateLimiter", () => {
  it('decides locally (source write-back), flushes every flushMs, and denies past the limit', async () => {
    const { time, limiter, stored } = setup()
    const decisions = []
    for (let i = 0; i < 7; i++) decisions.push(await limiter.limit('k'))
    assert.deepEqual(
      decisions.map((d) => d.allowed),
      [true, true, true, true, true, false, false],
    )
    assert.ok(decisions.every((d) => d.source === 'write-back'))
    assert.deepEqual(
      decisions.map((d) => d.remaining),
      [4, 3, 2, 1, 0, 0, 0],
    )
    assert.equal(stored(), 5, 'nothing flushed yet')
    time.advance(50)
    await settle()
    assert.equal(stored(), 0, 'the flush tick sent the five units')
  })

  it('refunds and resets reach the store; close() flushes what is held', async () => {
    const { limiter, stored } = setup()
    for (let i = 0; i < 4; i++) await limiter.limit('k')
    await limiter.refund('k', 1)
    assert.equal((await limiter.get('k')).remaining, 2)
    await limiter.close()
    assert.equal(stored(), 2)
    const again = setup()
    await again.limiter.limit('k')
    await again.limiter.close()
    await again.limiter.reset('k')
    assert.equal(again.stored(), 5, 'reset cleared the store')
  })

  it('a store without merge is refused at construction, naming the need', () => {
    const store: Store = { evaluate: () => Promise.resolve([]), reset: () => Promise.resolve(), close: () => Promise.resolve() }
    assert.throws(() => new RateLimiter({ store, policies: [policy] }), /write-back sync needs a store with merge\(\)/)
  })

  it('limitSync is refused (a cold key waits for the store)', () => {
    const { limiter } = setup()
    assert.equal(limiter.canLimitSync, false)
    assert.throws(() => limiter.limitSync('k'), /sync: 'write-back' reads a key from the store/)
  })

  it('on a real Redis: decisions are local, close() leaves the units in Redis', async () => {
    const server = await startRedis()
    const store = new RedisStore({ url: server.url })
    try {
      const limiter = new RateLimiter({ store, policies: [{ ...policy, limit: 100 }] })
      for (let i = 0; i < 30; i++) assert.equal((await limiter.limit('r')).source, 'write-back')
      await limiter.close()
      const [response] = await store.evaluate([{ key: 'r', policies: createPolicies([{ ...policy, limit: 100 }]), cost: 0 }])
      assert.equal(response.results[0].remaining, 70)
    } finally {
      await store.close()
      await server.stop()
    }
  })
})
