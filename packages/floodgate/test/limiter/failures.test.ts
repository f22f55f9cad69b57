// Failure as a mode: a store that really fails, hangs or answers late → timeout, open/closed/local, circuit breaker, events.
// Every delay and timeout runs on the test's clock, moved by hand: nothing races the machine's load.

import { describe, it, after, before } from 'node:test'
import assert from 'node:assert/strict'
import { RateLimiter } from '../../src/index.js'
import type { DecisionSource, PolicyOptions, RateLimiterOptions } from '../../src/index.js'
import { CircuitBreaker } from '../../src/limiter/circuit-breaker.js'
import { Clock, FaultyStore, FaultySubmitStore, nextTurn } from './fixtures.js'
import { MemoryStore } from '../../src/stores/memory/memory-store.js'
import type { Store } from '../../src/stores/store.js'

const POLICIES: PolicyOptions[] = [{ name: 'minute', algorithm: 'fixed-window', limit: 5, period: '1m' }]
const SHORT_TIMEOUT = '30ms'

const stores: FaultyStore[] = []
const unhandled: unknown[] = []
const onUnhandled = (reason: unknown) => unhandled.push(reason)
before(() => process.on('unhandledRejection', onUnhandled))
after(async () => {
  process.off('unhandledRejection', onUnhandled)
  await Promise.all(stores.map((store) => store.close()))
})

// Every case runs against a store that answers by promise (evaluate) and one that answers by
// callback (submit, as RedisStore does): the limiter takes a different path for each.
type Style = 'evaluate' | 'submit'

function setup(style: Style, options: Partial<RateLimiterOptions> = {}) {
  const clock = new Clock()
  const store = style === 'submit' ? new FaultySubmitStore(clock) : new FaultyStore(clock)
  stores.push(store)
  // The limiter's timeout and the store's delays both run on `clock`: a test advances it past a
  // delay or a timeout, so which comes first never depends on the machine's load.
  const limiter = new RateLimiter({ store, clock: clock.read, timers: clock.timers, policies: POLICIES, timeout: '30s', ...options })
  const events: string[] = []
  const errors: Error[] = []
  const fallbacks: DecisionSource[] = []
  limiter.on('store-error', (error) => errors.push(error))
  limiter.on('breaker-open', () => events.push('open'))
  limiter.on('breaker-close', () => events.push('close'))
  limiter.on('fallback', (source) => fallbacks.push(source))
  return { clock, store, limiter, events, errors, fallbacks }
}

for (const style of ['evaluate', 'submit'] as const) {
  describe(`failure modes (${style})`, () => {
    it('open: allows when the store fails, and says so', async () => {
      const { limiter, store, errors, fallbacks } = setup(style, { onStoreError: 'open' })
      store.health = 'throw'
      const decision = await limiter.limit('k')
      assert.equal(decision.allowed, true)
      assert.equal(decision.source, 'fallback-open')
      assert.equal(decision.limit, 5)
      assert.deepEqual(
        errors.map((e) => e.message),
        ['connection refused'],
      )
      assert.deepEqual(fallbacks, ['fallback-open'])
    })

    it('closed: denies with a retry wait when the store fails', async () => {
      const { limiter, store } = setup(style, { onStoreError: 'closed', breaker: { cooldown: '2s' } })
      store.health = 'throw'
      const decision = await limiter.limit('k')
      assert.equal(decision.allowed, false)
      assert.equal(decision.source, 'fallback-closed')
      assert.equal(decision.retryAfterMs, 2_000)
    })

    it('local: decides in-process with each limit divided by the instance count', async () => {
      const { limiter, store } = setup(style, { onStoreError: 'local', instances: 2 })
      store.health = 'throw'
      const decisions = []
      for (let i = 0; i < 4; i++) decisions.push(await limiter.limit('k'))
      // ceil(5 / 2) = 3 per instance.
      assert.deepEqual(
        decisions.map((d) => d.allowed),
        [true, true, true, false],
      )
      assert.ok(decisions.every((d) => d.source === 'fallback-local'))
      assert.equal(decisions[0].limit, 3)
      assert.equal(decisions[0].remaining, 2)
      // A local denial is not cached: once the store is back, it decides.
      store.health = 'ok'
      const back = await limiter.limit('k')
      assert.equal(back.source, 'store')
      assert.equal(back.allowed, true)
    })

    it('times out a hanging store and applies the mode', async () => {
      const { limiter, store, errors, clock } = setup(style, { onStoreError: 'closed', timeout: SHORT_TIMEOUT })
      store.health = 'hang'
      const pending = limiter.limit('k')
      clock.advance(30)
      const decision = await pending
      assert.equal(decision.source, 'fallback-closed')
      assert.equal((errors[0] as { code?: string }).code, 'STORE_TIMEOUT')
    })

    it('leaves no unhandled rejection when the store fails after the timeout', async () => {
      const { limiter, store, clock } = setup(style, { timeout: SHORT_TIMEOUT })
      store.health = 'late-reject'
      store.lateMs = 60
      const pending = limiter.limit('k')
      clock.advance(30)
      const decision = await pending
      assert.equal(decision.source, 'fallback-open')
      clock.advance(30)
      await nextTurn()
      await nextTurn()
      assert.deepEqual(unhandled, [])
    })

    it('uses the store while it answers within the timeout', async () => {
      const { limiter, store, clock } = setup(style)
      store.delayMs = 1
      const pending = limiter.limit('k')
      clock.advance(1)
      const decision = await pending
      assert.equal(decision.source, 'store')
      assert.equal(decision.remaining, 4)
    })

    it('refund and reset survive a failing store without rejecting', async () => {
      const { limiter, store, errors } = setup(style, { onStoreError: 'local' })
      store.health = 'throw'
      await limiter.limit('k')
      await limiter.refund('k', 1)
      await limiter.reset('k')
      assert.equal(errors.length, 3)
    })
  })

  describe(`circuit breaker (${style})`, () => {
    it('opens after N consecutive failures, skips the store, probes after the cooldown and closes', async () => {
      const { limiter, store, clock, events } = setup(style, { breaker: { failures: 3, cooldown: '1s' } })
      store.health = 'throw'
      for (let i = 0; i < 3; i++) await limiter.limit('k')
      assert.deepEqual(events, ['open'])
      const calls = store.calls
      const skipped = await limiter.limit('k')
      assert.equal(skipped.source, 'fallback-open')
      assert.equal(store.calls, calls, 'an open breaker does not call the store')
      // After the cooldown one probe goes; it fails, so the breaker stays open for another cooldown.
      clock.advance(1_000)
      await limiter.limit('k')
      assert.equal(store.calls, calls + 1)
      await limiter.limit('k')
      assert.equal(store.calls, calls + 1)
      assert.deepEqual(events, ['open'])
      // The store is back; the next probe succeeds and closes the breaker.
      store.health = 'ok'
      clock.advance(1_000)
      const probe = await limiter.limit('k')
      assert.equal(probe.source, 'store')
      assert.deepEqual(events, ['open', 'close'])
      assert.equal((await limiter.limit('k')).source, 'store')
    })

    it('lets exactly one probe through while half-open', async () => {
      const { limiter, store, clock } = setup(style, { breaker: { failures: 1, cooldown: '1s' } })
      store.health = 'throw'
      await limiter.limit('k')
      store.health = 'ok'
      store.delayMs = 5
      clock.advance(1_000)
      const calls = store.calls
      const pending = Promise.all([limiter.limit('k'), limiter.limit('k'), limiter.limit('k')])
      clock.advance(5)
      const decisions = await pending
      assert.equal(store.calls, calls + 1)
      assert.deepEqual(
        decisions.map((d) => d.source),
        ['store', 'fallback-open', 'fallback-open'],
      )
    })

    it('closed mode waits out the breaker: retryAfter is the time until the next probe', async () => {
      const { limiter, store, clock } = setup(style, { onStoreError: 'closed', breaker: { failures: 1, cooldown: '10s' } })
      store.health = 'throw'
      await limiter.limit('k')
      clock.advance(4_000)
      assert.equal((await limiter.limit('k')).retryAfterMs, 6_000)
    })
  })
}

describe('stores that answer by callback (submit)', () => {
  it('a submit that throws is a store failure; a second answer for one call is ignored', async () => {
    const clock = new Clock()
    const inner = new MemoryStore({ clock: clock.read })
    let mode: 'throw' | 'twice' = 'throw'
    const store: Store = {
      evaluate: (batch) => inner.evaluate(batch),
      submit(request, done) {
        if (mode === 'throw') throw new Error('submit blew up')
        void inner.evaluate([request]).then(([response]) => {
          done(null, response)
          done(new Error('a second answer'))
        })
      },
      reset: (key, policies) => inner.reset(key, policies),
      close: () => inner.close(),
    }
    const limiter = new RateLimiter({ store, clock: clock.read, policies: POLICIES, onStoreError: 'closed' })
    const errors: string[] = []
    limiter.on('store-error', (error) => errors.push(error.message))
    const failed = await limiter.limit('k')
    assert.equal(failed.source, 'fallback-closed')
    assert.deepEqual(errors, ['submit blew up'])
    mode = 'twice'
    const decided = await limiter.limit('k')
    assert.equal(decided.source, 'store')
    assert.equal(decided.remaining, 4)
    assert.deepEqual(errors, ['submit blew up'], 'the second answer reached nobody')
    await limiter.close()
    await store.close()
  })
})

describe('CircuitBreaker', () => {
  it('counts consecutive failures only', () => {
    const breaker = new CircuitBreaker(2, 100)
    breaker.recordFailure(0)
    breaker.recordSuccess()
    assert.equal(breaker.recordFailure(0), undefined)
    assert.equal(breaker.isOpen, false)
    assert.equal(breaker.recordFailure(0), 'opened')
    assert.equal(breaker.allows(99), false)
    assert.equal(breaker.allows(100), true)
    assert.equal(breaker.allows(100), false)
    assert.equal(breaker.recordSuccess(), 'closed')
    assert.equal(breaker.allows(100), true)
  })
})
