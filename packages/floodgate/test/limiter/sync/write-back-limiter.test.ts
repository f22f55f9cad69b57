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

function setup(options: { store?: Store; maxKeys?: number; onStoreError?: 'open' | 'closed' } = {}) {
  const time = new SimTime(START)
  const store = (options.store ?? new MemoryStore({ clock: time.clock })) as MemoryStore
  const limiter = new RateLimiter({
    store,
    policies: [policy],
    clock: time.clock,
    timers: { now: () => time.now, setTimeout: (callback, ms) => time.setTimeout(callback, ms) },
    denyCache: false,
    ...(options.maxKeys === undefined ? {} : { sync: { maxKeys: options.maxKeys } }),
    ...(options.onStoreError === undefined ? {} : { onStoreError: options.onStoreError }),
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

  it('sync.maxKeys bounds the keys held: a clean key makes room, and with none clean a new key goes to onStoreError', async () => {
    const inner = new MemoryStore({ clock: () => START })
    // A store whose merges can be made to fail: units then stay unsent, and their keys are not clean.
    let down = false
    const store: Store = {
      merge: (batch) => (down ? Promise.reject(new Error('down')) : inner.merge(batch)),
      evaluate: (batch) => inner.evaluate(batch),
      reset: (key, set) => inner.reset(key, set),
      close: () => inner.close(),
    }
    const { time, limiter } = setup({ store, maxKeys: 2, onStoreError: 'closed' })
    const errors: Error[] = []
    limiter.on('store-error', (error) => errors.push(error))
    assert.equal((await limiter.limit('a')).source, 'write-back')
    assert.equal((await limiter.limit('b')).source, 'write-back')
    await limiter.flush()
    // a and b are clean now: c takes the place of the oldest (a).
    assert.equal((await limiter.limit('c')).source, 'write-back')
    down = true
    await limiter.limit('b')
    await limiter.limit('c')
    time.advance(50)
    await settle()
    // b and c hold units the store has not taken: d is refused and decided by onStoreError.
    const refused = await limiter.limit('d')
    assert.equal(refused.source, 'fallback-closed')
    assert.equal(refused.allowed, false)
    assert.ok(errors.some((error) => /WRITE_BACK_FULL|holds 2 keys/.test(`${(error as { code?: string }).code} ${error.message}`)))
    down = false
    await limiter.flush()
    assert.equal((await limiter.limit('d')).source, 'write-back')
    await limiter.close()
    assert.equal(
      inner.evaluateSync({ key: 'b', policies: createPolicies([policy]), cost: 0 }).results[0].remaining,
      3,
      'b: every unit once',
    )
  })

  it('sync.maxKeys is validated', () => {
    for (const bad of [0, -1, 1.5, '10', null]) {
      assert.throws(
        () => new RateLimiter({ policies: [policy], sync: { maxKeys: bad as number } }),
        (error: Error) => /sync\.maxKeys: must be a whole number ≥ 1/.test(error.message),
      )
    }
    assert.throws(() => new RateLimiter({ policies: [policy], sync: { max: 3 } as never }), /sync\.max: unknown option/)
    assert.throws(() => new RateLimiter({ policies: [policy], sync: 5 as never }), /sync: expected an object/)
    // A mode given to the limiter, where it belongs on the policy: the error says where to put it.
    assert.throws(
      () => new RateLimiter({ policies: [policy], sync: 'auto' as never }),
      /sync: a sync mode is set on each policy: policies: \[\{ …, sync: 'auto' \}\]/,
    )
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
      // A timeout no busy machine reaches: the flush on close() must not give up on a slow Redis.
      const limiter = new RateLimiter({ store, policies: [{ ...policy, limit: 100 }], timeout: '30s' })
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
