// limiter.limitSync and the Store.evaluateSync capability: synchronous answers on in-process stores,
// the same decisions as limit(), and a clear refusal (nothing charged) where a store cannot answer so.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { RateLimiter, MemoryStore, FloodgateError } from '../../src/index.js'
import type { Decision, EvaluateRequest, EvaluateResponse, PolicyOptions, Store } from '../../src/index.js'
import { Clock, CountingMemoryStore, FaultyStore } from './fixtures.js'

const POLICIES: PolicyOptions[] = [
  { name: 'minute', algorithm: 'fixed-window', limit: 3, period: '1m' },
  { name: 'hour', algorithm: 'fixed-window', limit: 5, period: '1h' },
]

function isSyncUnsupported(pattern: RegExp) {
  return (error: unknown) => error instanceof FloodgateError && error.code === 'SYNC_UNSUPPORTED' && pattern.test(error.message)
}

/** What a caller reads of a decision (the lease is an object of its own each time). */
function summary(decision: Decision) {
  const { lease: _lease, ...rest } = decision
  return rest
}

/** A custom Store that decides in-process: it wraps a MemoryStore and counts which method was used. */
class CustomSyncStore implements Store {
  syncCalls = 0
  asyncCalls = 0
  failing = false
  private readonly inner: MemoryStore

  constructor(clock: Clock) {
    this.inner = new MemoryStore({ clock: clock.read })
  }

  evaluate(batch: readonly EvaluateRequest[]): Promise<EvaluateResponse[]> {
    this.asyncCalls++
    return this.inner.evaluate(batch)
  }

  evaluateSync(request: EvaluateRequest): EvaluateResponse {
    this.syncCalls++
    if (this.failing) throw new Error('the in-process backend failed')
    return this.inner.evaluateSync(request)
  }

  reset(key: string, policies: Parameters<Store['reset']>[1]): Promise<void> {
    return this.inner.reset(key, policies)
  }

  close(): Promise<void> {
    return this.inner.close()
  }
}

describe('limitSync on the MemoryStore', () => {
  it('answers synchronously with the decisions limit() gives, on the same state', async () => {
    const syncClock = new Clock()
    const asyncClock = new Clock()
    const sync = new RateLimiter({ store: new MemoryStore({ clock: syncClock.read }), clock: syncClock.read, policies: POLICIES })
    const awaited = new RateLimiter({ store: new MemoryStore({ clock: asyncClock.read }), clock: asyncClock.read, policies: POLICIES })
    assert.equal(sync.canLimitSync, true)
    for (let i = 0; i < 7; i++) {
      const decision = sync.limitSync('k', { cost: i === 5 ? 0 : 1 })
      assert.equal(decision instanceof Promise, false)
      assert.deepEqual(summary(decision), summary(await awaited.limit('k', { cost: i === 5 ? 0 : 1 })), `call ${i}`)
      syncClock.advance(10_000)
      asyncClock.advance(10_000)
    }
    // Both calls share the key's state: limit() sees what limitSync charged.
    const other = new RateLimiter({ policies: POLICIES })
    other.limitSync('shared')
    other.limitSync('shared')
    assert.equal((await other.limit('shared')).remaining, 0)
    assert.equal(other.limitSync('shared').allowed, false)
  })

  it('answers a denial from the deny cache without asking the store', () => {
    const clock = new Clock()
    const store = new CountingMemoryStore({ clock: clock.read })
    const limiter = new RateLimiter({ store, clock: clock.read, policies: [{ algorithm: 'fixed-window', limit: 1, period: '1m' }] })
    assert.equal(limiter.limitSync('k').allowed, true)
    assert.equal(limiter.limitSync('k').source, 'store')
    const calls = store.calls
    const cached = limiter.limitSync('k')
    assert.equal(cached.source, 'deny-cache')
    assert.equal(store.calls, calls)
  })

  it('hands out concurrency leases that release() takes back', async () => {
    const limiter = new RateLimiter({ policies: [{ name: 'slots', algorithm: 'concurrency', limit: 1, period: '1m' }] })
    const held = limiter.limitSync('k')
    assert.ok(held.lease)
    assert.equal(limiter.limitSync('k').allowed, false)
    await limiter.release(held.lease)
    assert.equal(limiter.limitSync('k').allowed, true)
  })

  it('decides shadow policies as limit() does: the enforced ones alone decide', () => {
    const limiter = new RateLimiter({
      policies: [
        { name: 'enforced', algorithm: 'fixed-window', limit: 5, period: '1m' },
        { name: 'trial', algorithm: 'fixed-window', limit: 1, period: '1m', shadow: true },
      ],
    })
    limiter.limitSync('k')
    const second = limiter.limitSync('k')
    assert.equal(second.allowed, true)
    assert.equal(second.shadow, true)
    assert.equal(second.remaining, 3)
  })

  it('confirms elastic admissions with a pool that answers synchronously', () => {
    const pool = new RateLimiter({ policies: [{ name: 'spare', algorithm: 'fixed-window', limit: 1, period: '1h' }] })
    const limiter = new RateLimiter({
      policies: [{ name: 'plan', algorithm: 'fixed-window', limit: 1, period: '1h', mode: 'elastic', ceiling: 3 }],
      pool: { limiter: pool },
    })
    assert.equal(limiter.canLimitSync, true)
    const decisions = [limiter.limitSync('k'), limiter.limitSync('k'), limiter.limitSync('k')]
    assert.deepEqual(
      decisions.map((d) => [d.allowed, d.over]),
      [
        [true, false],
        [true, true],
        [false, false],
      ],
    )
  })

  it("reports each answer as a 'decision' event while something listens, as limit() does", async () => {
    const clock = new Clock()
    const limiter = new RateLimiter({ policies: POLICIES, timers: clock.timers })
    const seen: [string, boolean, number, number][] = []
    const listener = (key: string, decision: Decision, cost: number, elapsedMs: number) =>
      seen.push([key, decision.allowed, cost, elapsedMs])
    limiter.limitSync('quiet')
    limiter.on('decision', listener)
    limiter.limitSync('a', { cost: 2 })
    await limiter.limit('b')
    limiter.off('decision', listener)
    limiter.limitSync('quiet')
    assert.deepEqual(seen, [
      ['a', true, 2, 0],
      ['b', true, 1, 0],
    ])
  })

  it('rejects bad arguments as limit() does', () => {
    const limiter = new RateLimiter({ policies: POLICIES })
    const invalid = (field: RegExp) => (error: unknown) =>
      error instanceof FloodgateError && error.code === 'INVALID_REQUEST' && field.test(error.message)
    assert.throws(() => limiter.limitSync(42 as never), invalid(/^key:/))
    assert.throws(() => limiter.limitSync('k', { cost: -1 }), invalid(/^cost:/))
  })
})

describe('the evaluateSync capability of a custom Store', () => {
  it('gives any store that offers it the synchronous path, for limit() and limitSync()', async () => {
    const clock = new Clock()
    const store = new CustomSyncStore(clock)
    const limiter = new RateLimiter({ store, clock: clock.read, policies: POLICIES })
    assert.equal(limiter.canLimitSync, true)
    assert.equal(limiter.limitSync('k').remaining, 2)
    assert.equal((await limiter.limit('k')).remaining, 1)
    assert.equal(store.syncCalls, 2)
    assert.equal(store.asyncCalls, 0)
  })

  it('treats a throwing evaluateSync as a store failure: the failure mode decides and the breaker counts', () => {
    const clock = new Clock()
    const store = new CustomSyncStore(clock)
    const breaker = { failures: 2, cooldown: '1s' as const }
    const limiter = new RateLimiter({ store, clock: clock.read, policies: POLICIES, onStoreError: 'closed', breaker })
    const errors: string[] = []
    let opened = 0
    limiter.on('store-error', (error) => errors.push(error.message))
    limiter.on('breaker-open', () => opened++)
    store.failing = true
    assert.equal(limiter.limitSync('k').source, 'fallback-closed')
    assert.equal(limiter.limitSync('k').source, 'fallback-closed')
    assert.deepEqual(errors, ['the in-process backend failed', 'the in-process backend failed'])
    assert.equal(opened, 1)
    // Open: the store is skipped until the cooldown passes.
    const calls = store.syncCalls
    assert.equal(limiter.limitSync('k').retryAfterMs, 1_000)
    assert.equal(store.syncCalls, calls)
    store.failing = false
    clock.advance(1_000)
    assert.equal(limiter.limitSync('k').source, 'store')
  })
})

describe('limitSync where the answer cannot be synchronous', () => {
  it('refuses a store without evaluateSync before charging anything', async () => {
    const clock = new Clock()
    const store = new FaultyStore(clock)
    // The timeout on the test's timers: on real ones a busy machine timed the answer out (remaining 3).
    const limiter = new RateLimiter({ store, clock: clock.read, timers: clock.timers, policies: POLICIES })
    assert.equal(limiter.canLimitSync, false)
    assert.throws(() => limiter.limitSync('k'), isSyncUnsupported(/^limitSync: the store cannot answer synchronously/))
    assert.equal(store.calls, 0)
    assert.equal((await limiter.limit('k')).remaining, 2, 'nothing was charged by the refused call')
    await store.close()
  })

  it('refuses elastic policies whose pool cannot answer synchronously, before charging anything', async () => {
    const clock = new Clock()
    const poolStore = new FaultyStore(clock)
    const pool = new RateLimiter({
      store: poolStore,
      clock: clock.read,
      timers: clock.timers,
      policies: [{ algorithm: 'fixed-window', limit: 10, period: '1h' }],
    })
    const limiter = new RateLimiter({
      policies: [{ name: 'plan', algorithm: 'fixed-window', limit: 1, period: '1h', mode: 'elastic', ceiling: 3 }],
      pool: { limiter: pool },
    })
    assert.equal(limiter.canLimitSync, false)
    assert.throws(() => limiter.limitSync('k'), isSyncUnsupported(/pool/))
    assert.equal((await limiter.get('k')).remaining, 1, 'nothing was charged by the refused call')
    await poolStore.close()
  })
})
