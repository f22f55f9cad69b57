// The one store call path: synchronous stores answer at once, others through the timeout and the
// breaker, and another engine over the store (callVia) is bounded the same way.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { EventEmitter } from 'node:events'
import { createPolicies } from '../../src/index.js'
import { RateLimiter, type RateLimiterEvents, type StoreCallHook } from '../../src/index.js'
import { GuardedStore } from '../../src/limiter/guarded-store.js'
import { MemoryStore } from '../../src/stores/memory/memory-store.js'
import { Clock, FaultyStore } from './fixtures.js'

const policies = createPolicies([{ algorithm: 'fixed-window', limit: 2, period: '1m' }])

function guarded(store: ConstructorParameters<typeof GuardedStore>[0], clock: Clock, onStoreCall?: StoreCallHook) {
  const events = new EventEmitter<RateLimiterEvents>()
  const errors: string[] = []
  events.on('store-error', (error) => errors.push((error as { code?: string }).code ?? error.message))
  const options = { timeoutMs: 30, breakerFailures: 5, breakerCooldownMs: 1_000, clock: clock.read, timers: clock.timers, onStoreCall }
  return { guard: new GuardedStore(store, options, events), errors }
}

describe('GuardedStore', () => {
  it('answers synchronously for a store with evaluateSync', () => {
    const clock = new Clock()
    const { guard } = guarded(new MemoryStore({ clock: clock.read }), clock)
    assert.equal(guard.synchronous, true)
    const answer = guard.call('k', policies, 1)
    assert.ok(answer !== undefined && !(answer instanceof Promise))
    assert.equal(answer.results[0].remaining, 1)
  })

  it('answers through a promise for a store without it', async () => {
    const clock = new Clock()
    const store = new FaultyStore(clock)
    const { guard } = guarded(store, clock)
    assert.equal(guard.synchronous, false)
    const answer = guard.call('k', policies, 1)
    assert.ok(answer instanceof Promise)
    assert.equal((await answer)?.results[0].remaining, 1)
    await store.close()
  })

  it('callVia: bounds another engine by the timeout, and abandons it when the timeout answers first', async () => {
    const clock = new Clock()
    const store = new FaultyStore(clock)
    const { guard, errors } = guarded(store, clock)
    const answered = await guard.callVia('k', policies, 1, (request, done) => {
      void store.evaluate([request]).then(([response]) => done(null, response))
    })
    assert.equal(answered?.results[0].remaining, 1)
    let abandoned = 0
    const hung = guard.callVia('k', policies, 1, () => () => abandoned++)
    clock.advance(30)
    assert.equal(await hung, undefined)
    assert.equal(abandoned, 1)
    assert.deepEqual(errors, ['STORE_TIMEOUT'])
    await store.close()
  })

  it('onStoreCall: told of each store call as it starts and as it ends, and whether it failed', async () => {
    const clock = new Clock()
    const seen: string[] = []
    const hook: StoreCallHook = (key, cost) => {
      seen.push(`start ${key} ${cost}`)
      return (failed) => seen.push(`end ${key} ${failed ? 'failed' : 'ok'}`)
    }
    const { guard } = guarded(new MemoryStore({ clock: clock.read }), clock, hook)
    guard.call('sync', policies, 1)
    const store = new FaultyStore(clock)
    const remote = guarded(store, clock, hook).guard
    await remote.call('async', policies, 2)
    store.health = 'hang'
    const hung = remote.call('hung', policies, 1)
    assert.deepEqual(seen.slice(-1), ['start hung 1'], 'not ended before its answer')
    clock.advance(30)
    await hung
    assert.deepEqual(seen, ['start sync 1', 'end sync ok', 'start async 2', 'end async ok', 'start hung 1', 'end hung failed'])
    await store.close()
  })

  it('onStoreCall must be a function; the limiter passes it to its store calls', async () => {
    assert.throws(() => new RateLimiter({ onStoreCall: 'span' as never }), /onStoreCall: expected a function/)
    const keys: string[] = []
    const limiter = new RateLimiter({
      policies: [{ algorithm: 'fixed-window', limit: 2, period: '1m' }],
      onStoreCall: (key) => {
        keys.push(key)
        return undefined
      },
    })
    await limiter.limit('a')
    assert.deepEqual(keys, ['a'])
    await limiter.close()
  })
})
