// The one store call path: synchronous stores answer at once, others through the timeout and the
// breaker, and another engine over the store (callVia) is bounded the same way.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { EventEmitter } from 'node:events'
import { createPolicies } from '../../src/index.js'
import type { RateLimiterEvents } from '../../src/index.js'
import { GuardedStore } from '../../src/limiter/guarded-store.js'
import { MemoryStore } from '../../src/stores/memory/memory-store.js'
import { Clock, FaultyStore } from './fixtures.js'

const policies = createPolicies([{ algorithm: 'fixed-window', limit: 2, period: '1m' }])

function guarded(store: ConstructorParameters<typeof GuardedStore>[0], clock: Clock) {
  const events = new EventEmitter<RateLimiterEvents>()
  const errors: string[] = []
  events.on('store-error', (error) => errors.push((error as { code?: string }).code ?? error.message))
  const options = { timeoutMs: 30, breakerFailures: 5, breakerCooldownMs: 1_000, clock: clock.read, timers: clock.timers }
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
})
