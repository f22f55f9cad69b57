// RateLimiter modes: soft, elastic (with a real pool limiter), block periods, shadow policies, concurrency leases.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { RateLimiter, MemoryStore, createPolicies } from '../../src/index.js'
import type { PolicyOptions, RateLimiterOptions } from '../../src/index.js'
import { Clock, T0 } from './fixtures.js'

function limiterWith(policies: PolicyOptions[], options: Partial<RateLimiterOptions> = {}) {
  const clock = new Clock()
  const limiter = new RateLimiter({ store: new MemoryStore({ clock: clock.read }), clock: clock.read, policies, ...options })
  return { clock, limiter }
}

describe('soft mode', () => {
  it('admits up to floor(limit × (1 + overage)), reporting the nominal limit and over', async () => {
    const { limiter } = limiterWith([{ name: 'soft', algorithm: 'fixed-window', limit: 10, period: '1m', mode: 'soft', overage: 0.25 }])
    const decisions = []
    for (let i = 0; i < 13; i++) decisions.push(await limiter.limit('k'))
    // floor(10 × 1.25) = 12 admitted.
    assert.deepEqual(
      decisions.map((d) => d.allowed),
      [...Array(12).fill(true), false],
    )
    assert.deepEqual(
      decisions.slice(0, 12).map((d) => d.remaining),
      [9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0, 0],
    )
    assert.deepEqual(
      decisions.map((d) => d.over),
      [...Array(10).fill(false), true, true, false],
    )
    assert.ok(decisions.every((d) => d.limit === 10))
    assert.equal(decisions[10].policies[0].over, true)
  })

  it('scales a bucket’s burst too', async () => {
    const { limiter } = limiterWith([{ algorithm: 'token-bucket', limit: 4, period: '1h', burst: 4, mode: 'soft', overage: 0.5 }])
    let admitted = 0
    for (let i = 0; i < 10; i++) if ((await limiter.limit('k')).allowed) admitted++
    assert.equal(admitted, 6)
  })
})

describe('elastic mode', () => {
  function elastic(poolLimit: number) {
    const pool = new RateLimiter({ policies: [{ name: 'spare', algorithm: 'fixed-window', limit: poolLimit, period: '1h' }] })
    const { limiter, clock } = limiterWith(
      [{ name: 'plan', algorithm: 'fixed-window', limit: 5, period: '1h', mode: 'elastic', ceiling: 8 }],
      { pool: { limiter: pool, key: 'spare-capacity' } },
    )
    return { limiter, pool, clock }
  }

  it('admits past the limit only while the pool admits, and refunds the key when it does not', async () => {
    const { limiter, pool } = elastic(2)
    const decisions = []
    for (let i = 0; i < 8; i++) decisions.push(await limiter.limit('a'))
    assert.deepEqual(
      decisions.map((d) => d.allowed),
      [true, true, true, true, true, true, true, false],
    )
    assert.deepEqual(
      decisions.map((d) => d.over),
      [false, false, false, false, false, true, true, false],
    )
    assert.equal(decisions[7].policy, 'plan')
    assert.ok(decisions[7].retryAfterMs > 0)
    // The pool is spent (2 of 2); the 8th request's charge on the key was refunded: 7 used of the ceiling 8.
    assert.equal((await pool.get('spare-capacity')).remaining, 0)
    const peek = await limiter.get('a')
    assert.equal(peek.remaining, 0)
    // A pool denial is not remembered: the next call asks the store (and the pool) again.
    const again = await limiter.limit('a')
    assert.equal(again.allowed, false)
    assert.equal(again.source, 'store')
    // Another key gets its nominal 5, then the empty pool stops it.
    let admitted = 0
    for (let i = 0; i < 7; i++) if ((await limiter.limit('b')).allowed) admitted++
    assert.equal(admitted, 5)
  })

  it('asks the pool only for elastic policies past their limit, and never for a peek', async () => {
    const pool = new RateLimiter({ policies: [{ name: 'spare', algorithm: 'fixed-window', limit: 1, period: '1h' }] })
    const { limiter } = limiterWith(
      [
        { name: 'plan', algorithm: 'fixed-window', limit: 5, period: '1h', mode: 'elastic', ceiling: 8 },
        { name: 'soft', algorithm: 'fixed-window', limit: 2, period: '1h', mode: 'soft', overage: 1 },
      ],
      { pool: { limiter: pool } },
    )
    const third = await limiter.limit('a')
    await limiter.limit('a')
    const over = await limiter.limit('a')
    // The soft policy is over (3 of 2) but needs no pool: the pool is untouched.
    assert.equal(over.allowed, true)
    assert.equal(over.policies[1].over, true)
    assert.equal((await pool.get('elastic-pool')).remaining, 1)
    assert.equal(third.allowed, true)
    for (let i = 0; i < 3; i++) await limiter.limit('b', { cost: 0 })
    assert.equal((await pool.get('elastic-pool')).remaining, 1)
  })

  it('never admits past the ceiling, whatever the pool says', async () => {
    const { limiter } = elastic(100)
    let admitted = 0
    for (let i = 0; i < 12; i++) if ((await limiter.limit('a')).allowed) admitted++
    assert.equal(admitted, 8)
    const denied = await limiter.limit('a')
    assert.equal(denied.allowed, false)
    // A denial by the store itself (the ceiling) is exact, so the deny cache may answer it.
    assert.equal(denied.source, 'deny-cache')
  })
})

describe('block periods', () => {
  it('keeps a key denied for blockMs after a denial, even when its window restores', async () => {
    const { limiter, clock } = limiterWith([{ algorithm: 'fixed-window', limit: 2, period: '1s', blockMs: '1m' }], { denyCache: false })
    await limiter.limit('k')
    await limiter.limit('k')
    const denial = await limiter.limit('k')
    assert.equal(denial.allowed, false)
    assert.equal(denial.retryAfterMs, 60_000)
    clock.advance(5_000)
    const blocked = await limiter.limit('k')
    assert.equal(blocked.allowed, false)
    assert.equal(blocked.policies[0].blocked, true)
    assert.equal(blocked.retryAfterMs, 55_000)
    clock.advance(55_000)
    assert.equal((await limiter.limit('k')).allowed, true)
  })

  it('answers blocked keys from the deny cache until the block ends', async () => {
    const { limiter, clock } = limiterWith([{ algorithm: 'fixed-window', limit: 1, period: '1s', blockMs: '10s' }])
    await limiter.limit('k')
    await limiter.limit('k')
    clock.advance(9_000)
    const cached = await limiter.limit('k')
    assert.equal(cached.source, 'deny-cache')
    assert.equal(cached.retryAfterMs, 1_000)
    clock.advance(1_000)
    const after = await limiter.limit('k')
    assert.equal(after.allowed, true)
    assert.equal(after.source, 'store')
  })
})

describe('shadow policies', () => {
  it('reports a shadow policy that would deny, never denies for it, and charges the enforced ones', async () => {
    const { limiter } = limiterWith([
      { name: 'real', algorithm: 'fixed-window', limit: 5, period: '1h' },
      { name: 'trial', algorithm: 'fixed-window', limit: 2, period: '1h', shadow: true },
    ])
    const decisions = []
    for (let i = 0; i < 6; i++) decisions.push(await limiter.limit('k'))
    assert.deepEqual(
      decisions.map((d) => d.allowed),
      [true, true, true, true, true, false],
    )
    assert.deepEqual(
      decisions.map((d) => d.shadow),
      [false, false, true, true, true, true],
    )
    // Only enforced policies speak for a decision.
    assert.ok(decisions.every((d) => d.policy === 'real'))
    const trial = decisions[2].policies[1]
    assert.equal(trial.name, 'trial')
    assert.equal(trial.allowed, false)
    assert.equal(trial.shadow, true)
    assert.equal(decisions[2].policies[0].remaining, 2)
  })

  it('leaves shadow policies uncharged when the enforced ones deny', async () => {
    const { limiter } = limiterWith(
      [
        { name: 'real', algorithm: 'fixed-window', limit: 2, period: '1h' },
        { name: 'trial', algorithm: 'fixed-window', limit: 10, period: '1h', shadow: true },
      ],
      { denyCache: false },
    )
    for (let i = 0; i < 5; i++) await limiter.limit('k')
    const peek = await limiter.get('k')
    assert.equal(peek.policies[1].remaining, 8)
    assert.equal(peek.policies[1].shadow, false)
  })

  it('never denies a set of shadow policies only', async () => {
    const { limiter } = limiterWith([{ name: 'trial', algorithm: 'fixed-window', limit: 1, period: '1h', shadow: true }])
    await limiter.limit('k')
    const second = await limiter.limit('k')
    assert.equal(second.allowed, true)
    assert.equal(second.shadow, true)
    assert.equal(second.retryAfterMs, 0)
  })
})

describe('concurrency leases', () => {
  const policies: PolicyOptions[] = [
    { name: 'inflight', algorithm: 'concurrency', limit: 2, period: '1m' },
    { name: 'rate', algorithm: 'fixed-window', limit: 100, period: '1h' },
  ]

  it('hands out leases; release frees the slot on the concurrency policy only, once', async () => {
    const { limiter } = limiterWith(policies)
    const a = await limiter.limit('k')
    const b = await limiter.limit('k')
    assert.deepEqual(a.lease, { key: 'k', cost: 1, policies: ['inflight'], acquiredAt: T0 })
    assert.ok(b.lease)
    const full = await limiter.limit('k')
    assert.equal(full.allowed, false)
    assert.equal(full.policy, 'inflight')
    assert.equal(full.lease, undefined)
    await limiter.release(a.lease!)
    await limiter.release(a.lease!)
    const c = await limiter.limit('k')
    assert.equal(c.allowed, true, 'a released slot is free again, and the concurrency denial was not cached')
    assert.equal((await limiter.limit('k')).allowed, false, 'the double release freed nothing more')
    const peek = await limiter.get('k')
    // The rate policy kept every charge: 3 admitted, releases refund nothing there.
    assert.equal(peek.policies[1].remaining, 97)
  })

  it('does not release a lease that expired by itself: the slot may be someone else’s now', async () => {
    const { limiter, clock } = limiterWith([{ name: 'one', algorithm: 'concurrency', limit: 1, period: '1m' }])
    const first = await limiter.limit('k')
    clock.advance(60_000)
    const second = await limiter.limit('k')
    assert.equal(second.allowed, true, 'the first lease expired')
    clock.advance(1_000)
    await limiter.release(first.lease!)
    assert.equal((await limiter.limit('k')).allowed, false, 'the second lease still holds the only slot')
    await limiter.release(second.lease!)
    assert.equal((await limiter.limit('k')).allowed, true)
  })

  it('resolves a lease that crossed a process boundary by its policy names', async () => {
    const { limiter } = limiterWith(policies)
    const held = await limiter.limit('k', { cost: 2 })
    const copy = JSON.parse(JSON.stringify(held.lease))
    await limiter.release(copy)
    assert.equal((await limiter.get('k')).policies[0].remaining, 2)
    await assert.rejects(limiter.release({ key: 'k', cost: 1, policies: ['rate'] }), /lease\.policies/)
  })

  it('carries leases for per-call policy sets', async () => {
    const limiter = new RateLimiter()
    const set = createPolicies([{ algorithm: 'concurrency', limit: 1, period: '1m' }])
    const held = await limiter.limit('k', { policies: set })
    assert.equal((await limiter.limit('k', { policies: set })).allowed, false)
    await limiter.release(held.lease!)
    assert.equal((await limiter.limit('k', { policies: set })).allowed, true)
  })
})
