// onStoreError 'open' has a ceiling (issue 26 §3): while the store fails, a key is admitted at most
// its per-instance share of each limit per window, never without limit. Clocks are the test's.

import assert from 'node:assert/strict'
import { after, describe, it } from 'node:test'
import { RateLimiter } from '../../src/index.js'
import type { PolicyOptions, RateLimiterOptions } from '../../src/index.js'
import { Clock, FaultyStore } from './fixtures.js'

const stores: FaultyStore[] = []
after(async () => {
  await Promise.all(stores.map((store) => store.close()))
})

function failing(policies: PolicyOptions[], options: Partial<RateLimiterOptions> = {}) {
  const clock = new Clock()
  const store = new FaultyStore(clock)
  stores.push(store)
  store.health = 'throw'
  const limiter = new RateLimiter({ store, clock: clock.read, timers: clock.timers, policies, ...options })
  return { clock, store, limiter }
}

async function admitted(limiter: RateLimiter, key: string, attempts: number): Promise<number> {
  let count = 0
  for (let i = 0; i < attempts; i++) {
    const decision = await limiter.limit(key)
    assert.equal(decision.source, 'fallback-open')
    if (decision.allowed) count++
  }
  return count
}

describe("onStoreError 'open' ceiling", () => {
  it('admits a key at most its limit per window while the store fails, then denies until the window ends', async () => {
    const { limiter, clock } = failing([{ algorithm: 'gcra', limit: 5, period: '1m' }])
    assert.equal(await admitted(limiter, 'hot', 12), 5)
    const denied = await limiter.limit('hot')
    assert.equal(denied.allowed, false)
    assert.ok(denied.retryAfterMs > 0 && denied.retryAfterMs <= 60_000, `retryAfterMs ${denied.retryAfterMs}`)
    // Another key has its own ceiling; the next window a new one.
    assert.equal(await admitted(limiter, 'other', 7), 5)
    clock.advance(60_000)
    assert.equal(await admitted(limiter, 'hot', 7), 5)
  })

  it('divides the ceiling among `instances`, and holds for every enforced policy but shadow ones', async () => {
    const { limiter } = failing(
      [
        { name: 'minute', algorithm: 'sliding-window', limit: 10, period: '1m' },
        { name: 'audit', algorithm: 'fixed-window', limit: 1, period: '1m', shadow: true },
      ],
      { instances: 4 },
    )
    assert.equal(await admitted(limiter, 'k', 10), 3)
  })

  it('gives back a refund made while the store fails', async () => {
    const { limiter } = failing([{ algorithm: 'fixed-window', limit: 2, period: '1h' }])
    assert.equal(await admitted(limiter, 'k', 2), 2)
    await limiter.refund('k', 1)
    assert.equal(await admitted(limiter, 'k', 3), 1)
  })

  it('leaves the store deciding once it answers again', async () => {
    const { limiter, store } = failing([{ algorithm: 'fixed-window', limit: 3, period: '1h' }], { breaker: { failures: 100 } })
    assert.equal(await admitted(limiter, 'k', 4), 3)
    store.health = 'ok'
    const decision = await limiter.limit('k')
    assert.equal(decision.source, 'store')
    assert.equal(decision.allowed, true)
  })
})
