// The deny cache: denied keys answered in-process (no store call) until their retry time, bounded, cleared by refund/reset.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { RateLimiter, createPolicies } from '../../src/index.js'
import type { PolicyOptions, RateLimiterOptions } from '../../src/index.js'
import { DenyCache } from '../../src/limiter/deny-cache.js'
import { Clock, CountingMemoryStore } from './fixtures.js'

const POLICIES: PolicyOptions[] = [{ name: 'minute', algorithm: 'fixed-window', limit: 2, period: '1m' }]

function setup(options: Partial<RateLimiterOptions> = {}) {
  const clock = new Clock()
  const store = new CountingMemoryStore({ clock: clock.read })
  const limiter = new RateLimiter({ store, clock: clock.read, policies: POLICIES, ...options })
  return { clock, store, limiter }
}

async function exhaust(limiter: RateLimiter, key: string) {
  await limiter.limit(key)
  await limiter.limit(key)
  return limiter.limit(key)
}

describe('deny cache', () => {
  it('answers a denied key without asking the store until its retry time', async () => {
    const { limiter, store, clock } = setup()
    const denial = await exhaust(limiter, 'k')
    assert.equal(denial.source, 'store')
    const calls = store.calls
    clock.advance(1_000)
    const cached = await limiter.limit('k')
    assert.equal(store.calls, calls, 'no store call')
    assert.equal(cached.source, 'deny-cache')
    assert.equal(cached.allowed, false)
    assert.equal(cached.retryAfterMs, denial.retryAfterMs - 1_000)
    assert.equal(cached.policies[0].retryAfterMs, denial.retryAfterMs - 1_000)
    assert.equal(cached.policy, 'minute')
    clock.advance(denial.retryAfterMs - 1_000)
    const fresh = await limiter.limit('k')
    assert.equal(fresh.source, 'store')
    assert.equal(fresh.allowed, true)
    assert.equal(store.calls, calls + 1)
  })

  it('answers only the cost it was denied for: a smaller cost may pass', async () => {
    const { limiter } = setup()
    await limiter.limit('k')
    const big = await limiter.limit('k', { cost: 2 })
    assert.equal(big.allowed, false)
    assert.equal((await limiter.limit('k', { cost: 2 })).source, 'deny-cache')
    const small = await limiter.limit('k', { cost: 1 })
    assert.equal(small.allowed, true)
    assert.equal(small.source, 'store')
  })

  it('is skipped for peeks, which always read the store', async () => {
    const { limiter, store } = setup()
    await exhaust(limiter, 'k')
    const calls = store.calls
    const peek = await limiter.get('k')
    assert.equal(peek.source, 'store')
    assert.equal(store.calls, calls + 1)
  })

  it('is cleared by refund and reset', async () => {
    const { limiter } = setup()
    await exhaust(limiter, 'a')
    await limiter.refund('a', 1)
    assert.equal((await limiter.limit('a')).allowed, true)
    await exhaust(limiter, 'b')
    await limiter.reset('b')
    assert.equal((await limiter.limit('b')).allowed, true)
  })

  it('can be turned off', async () => {
    const { limiter, store } = setup({ denyCache: false })
    await exhaust(limiter, 'k')
    const calls = store.calls
    const again = await limiter.limit('k')
    assert.equal(again.source, 'store')
    assert.equal(store.calls, calls + 1)
  })

  it('keeps the denials of different policy sets for one key apart', async () => {
    const { limiter } = setup()
    const other = createPolicies([{ name: 'other', algorithm: 'fixed-window', limit: 1, period: '1m' }])
    await exhaust(limiter, 'k')
    const viaOther = await limiter.limit('k', { policies: other })
    assert.equal(viaOther.allowed, true)
    assert.equal(viaOther.source, 'store')
  })

  it('recognises an equal policy set passed in a new array on every call', async () => {
    const { limiter, store } = setup()
    const fresh = () => createPolicies([{ name: 'override', algorithm: 'fixed-window', limit: 1, period: '1m' }])
    await limiter.limit('k', { policies: fresh() })
    assert.equal((await limiter.limit('k', { policies: fresh() })).source, 'store')
    const calls = store.calls
    const cached = await limiter.limit('k', { policies: fresh() })
    assert.equal(cached.source, 'deny-cache')
    assert.equal(store.calls, calls)
  })

  it('is bounded under a flood of denied unique keys', async () => {
    const { limiter, store } = setup({ denyCache: { maxKeys: 10 } })
    for (let i = 0; i < 100; i++) await exhaust(limiter, `k${i}`)
    // The ten most recent denials are cached; older ones went back to the store.
    let calls = store.calls
    await limiter.limit('k99')
    assert.equal(store.calls, calls)
    calls = store.calls
    await limiter.limit('k0')
    assert.equal(store.calls, calls + 1)
  })
})

describe('DenyCache', () => {
  it('holds at most maxKeys entries, drops expired ones and ones of another owner', () => {
    const cache = new DenyCache<string>(3)
    const owner = {}
    for (let i = 0; i < 10; i++) cache.set(`k${i}`, owner, 100, `v${i}`)
    assert.equal(cache.size, 3)
    assert.equal(cache.get('k0', owner, 0), undefined)
    assert.equal(cache.get('k9', owner, 99)?.value, 'v9')
    assert.equal(cache.get('k9', owner, 100), undefined)
    assert.equal(cache.get('k8', {}, 0), undefined)
    assert.equal(cache.size, 1)
  })
})
