// RateLimiter basics: decisions, multi-policy atomicity, cost, peek, get, refund, reset, per-call policies, validation.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { RateLimiter, MemoryStore, FloodgateError, createPolicies } from '../../src/index.js'
import type { RateLimiterOptions } from '../../src/index.js'
import { Clock } from './fixtures.js'

function setup(options: Partial<RateLimiterOptions> = {}) {
  const clock = new Clock()
  const store = new MemoryStore({ clock: clock.read })
  const limiter = new RateLimiter({
    store,
    clock: clock.read,
    policies: [
      { name: 'minute', algorithm: 'fixed-window', limit: 3, period: '1m' },
      { name: 'hour', algorithm: 'fixed-window', limit: 5, period: '1h' },
    ],
    ...options,
  })
  return { clock, store, limiter }
}

function isError(code: string, field: RegExp) {
  return (error: unknown) => error instanceof FloodgateError && error.code === code && field.test(error.message)
}

describe('RateLimiter decisions', () => {
  it('reports the tightest policy while allowed and the denying one when denied', async () => {
    const { limiter } = setup()
    const first = await limiter.limit('user:1')
    assert.deepEqual(
      { allowed: first.allowed, policy: first.policy, limit: first.limit, remaining: first.remaining, source: first.source },
      { allowed: true, policy: 'minute', limit: 3, remaining: 2, source: 'store' },
    )
    assert.deepEqual(
      first.policies.map((p) => [p.name, p.remaining]),
      [
        ['minute', 2],
        ['hour', 4],
      ],
    )
    assert.equal(first.retryAfterMs, 0)
    assert.equal(first.lease, undefined)
    await limiter.limit('user:1')
    await limiter.limit('user:1')
    const denied = await limiter.limit('user:1')
    assert.equal(denied.allowed, false)
    assert.equal(denied.policy, 'minute')
    assert.ok(denied.retryAfterMs > 0 && denied.retryAfterMs <= 60_000)
  })

  it('is all-or-nothing: "3 per minute and 5 per hour", a denial by one charges none', async () => {
    const { limiter, clock } = setup({ denyCache: false })
    for (let i = 0; i < 3; i++) assert.equal((await limiter.limit('k')).allowed, true)
    const byMinute = await limiter.limit('k')
    assert.equal(byMinute.policy, 'minute')
    // The hourly policy was not charged by that denial.
    assert.equal(byMinute.policies[1].remaining, 2)
    clock.advance(60_000)
    assert.equal((await limiter.limit('k')).allowed, true)
    assert.equal((await limiter.limit('k')).allowed, true)
    const byHour = await limiter.limit('k')
    assert.equal(byHour.allowed, false)
    assert.equal(byHour.policy, 'hour')
    // ... and the minute policy was not charged by the hourly denial: one left in this minute.
    assert.equal(byHour.policies[0].remaining, 1)
    assert.equal(byHour.policies[0].allowed, true)
  })

  it('charges cost units and peeks with cost 0 or get()', async () => {
    const { limiter } = setup()
    assert.equal((await limiter.limit('k', { cost: 2 })).remaining, 1)
    const peek = await limiter.limit('k', { cost: 0 })
    assert.equal(peek.remaining, 1)
    const got = await limiter.get('k')
    assert.equal(got.remaining, 1)
    assert.equal(got.allowed, true)
    assert.equal((await limiter.limit('k', { cost: 2 })).allowed, false)
    assert.equal((await limiter.get('k')).remaining, 1)
  })

  it('refund gives units back on every policy', async () => {
    const { limiter } = setup()
    for (let i = 0; i < 3; i++) await limiter.limit('k')
    assert.equal((await limiter.limit('k')).allowed, false)
    await limiter.refund('k', 2)
    const after = await limiter.limit('k')
    assert.equal(after.allowed, true)
    assert.equal(after.source, 'store')
    assert.deepEqual(
      after.policies.map((p) => p.remaining),
      [1, 3],
    )
  })

  it('reset forgets the key', async () => {
    const { limiter } = setup()
    for (let i = 0; i < 3; i++) await limiter.limit('k')
    assert.equal((await limiter.limit('k')).allowed, false)
    await limiter.reset('k')
    const after = await limiter.limit('k')
    assert.equal(after.allowed, true)
    assert.equal(after.remaining, 2)
  })

  it('decides per-call policy sets on their own state', async () => {
    const { limiter } = setup()
    const strict = createPolicies([{ name: 'strict', algorithm: 'fixed-window', limit: 1, period: '1m' }])
    assert.equal((await limiter.limit('k', { policies: strict })).allowed, true)
    const denied = await limiter.limit('k', { policies: strict })
    assert.equal(denied.allowed, false)
    assert.equal(denied.policy, 'strict')
    // The limiter's own set is untouched by the other set, and by its denial in the deny cache.
    assert.equal((await limiter.limit('k')).allowed, true)
    assert.equal((await limiter.limit('k', { policies: strict })).source, 'deny-cache')
  })

  it('works with only per-call policies, and says so when a call has none', async () => {
    const limiter = new RateLimiter()
    const policies = createPolicies([{ algorithm: 'gcra', limit: 2, period: '1s' }])
    assert.equal((await limiter.limit('k', { policies })).allowed, true)
    await assert.rejects(limiter.limit('k'), isError('INVALID_REQUEST', /^policies:/))
    await limiter.close()
  })

  it('rejects bad keys, costs and leases with clear errors', async () => {
    const { limiter } = setup()
    await assert.rejects(limiter.limit(42 as unknown as string), isError('INVALID_REQUEST', /^key:/))
    for (const cost of [-1, 1.5, Number.NaN, Infinity, '1']) {
      await assert.rejects(limiter.limit('k', { cost: cost as number }), isError('INVALID_REQUEST', /^cost:/))
    }
    await assert.rejects(limiter.refund('k', 0), isError('INVALID_REQUEST', /^cost:/))
    await assert.rejects(limiter.refund(undefined as unknown as string, 1), isError('INVALID_REQUEST', /^key:/))
    await assert.rejects(limiter.reset({} as unknown as string), isError('INVALID_REQUEST', /^key:/))
    await assert.rejects(limiter.release({ key: 'k' } as never), isError('INVALID_REQUEST', /^lease:/))
    await assert.rejects(limiter.limit('k', { policies: [] }), isError('INVALID_REQUEST', /^policies:/))
  })
})

describe('RateLimiter options', () => {
  const policies = [{ algorithm: 'fixed-window' as const, limit: 1, period: '1s' as const }]
  const cases: [string, RateLimiterOptions, string, RegExp][] = [
    ['unknown option', { policies, tiemout: 5 } as RateLimiterOptions, 'INVALID_OPTION', /^tiemout:/],
    ['policies empty', { policies: [] }, 'INVALID_POLICY', /^policies:/],
    [
      'policies not a list',
      { policies: policies[0] } as never,
      'INVALID_OPTION',
      /^policies: expected a list of policies: wrap the policy in \[ \]/,
    ],
    // Names from other limiters say where the Floodgate equivalent lives.
    [
      'limit at the top',
      { limit: 100, period: '15m' } as never,
      'INVALID_OPTION',
      /^limit: unknown option: the limit belongs to a policy: policies: \[\{ algorithm/,
    ],
    [
      'rate-limiter-flexible points',
      { points: 5, duration: 1 } as never,
      'INVALID_OPTION',
      /^points: unknown option: points is a policy's limit/,
    ],
    [
      'express-rate-limit windowMs',
      { windowMs: 60_000 } as never,
      'INVALID_OPTION',
      /^windowMs: unknown option: the window is a policy's period/,
    ],
    ['a Redis client', { redis: {} } as never, 'INVALID_OPTION', /^redis: unknown option: use store: new RedisStore\(\{ client \}\)/],
    ['policy field', { policies: [{ algorithm: 'gcra', limit: 0, period: '1s' }] }, 'INVALID_POLICY', /^policies\[0\]\.limit:/],
    ['store', { policies, store: {} as never }, 'INVALID_OPTION', /^store:/],
    ['timeout', { policies, timeout: 'soon' as never }, 'INVALID_DURATION', /^timeout:/],
    ['timeout zero', { policies, timeout: 0 }, 'INVALID_DURATION', /^timeout:/],
    ['onStoreError', { policies, onStoreError: 'retry' as never }, 'INVALID_OPTION', /^onStoreError:/],
    ['instances', { policies, instances: 0 }, 'INVALID_OPTION', /^instances:/],
    ['instances fraction', { policies, instances: 1.5 }, 'INVALID_OPTION', /^instances:/],
    ['breaker', { policies, breaker: 3 as never }, 'INVALID_OPTION', /^breaker:/],
    ['breaker.failures', { policies, breaker: { failures: 0 } }, 'INVALID_OPTION', /^breaker\.failures:/],
    ['breaker.cooldown', { policies, breaker: { cooldown: '-1s' as never } }, 'INVALID_DURATION', /^breaker\.cooldown:/],
    ['breaker unknown', { policies, breaker: { failure: 3 } as never }, 'INVALID_OPTION', /^breaker\.failure:/],
    ['denyCache', { policies, denyCache: true as never }, 'INVALID_OPTION', /^denyCache:/],
    ['denyCache.maxKeys', { policies, denyCache: { maxKeys: -5 } }, 'INVALID_OPTION', /^denyCache\.maxKeys:/],
    [
      'pool missing for elastic',
      { policies: [{ algorithm: 'fixed-window', limit: 1, period: '1s', mode: 'elastic', ceiling: 2 }] },
      'INVALID_OPTION',
      /^pool:/,
    ],
    ['pool.limiter', { policies, pool: { limiter: {} } as never }, 'INVALID_OPTION', /^pool\.limiter:/],
    ['pool.key', { policies, pool: { limiter: new RateLimiter({ policies }), key: '' } }, 'INVALID_OPTION', /^pool\.key:/],
    ['clock', { policies, clock: 'now' as never }, 'INVALID_OPTION', /^clock:/],
  ]
  for (const [name, options, code, field] of cases) {
    it(`rejects a bad ${name}`, () => {
      assert.throws(() => new RateLimiter(options), isError(code, field))
    })
  }

  it('rejects per-call elastic policies without a pool', async () => {
    const limiter = new RateLimiter()
    const elastic = createPolicies([{ algorithm: 'fixed-window', limit: 1, period: '1s', mode: 'elastic', ceiling: 2 }])
    await assert.rejects(limiter.limit('k', { policies: elastic }), isError('INVALID_OPTION', /^pool:/))
  })

  it('exposes its validated policies', () => {
    const limiter = new RateLimiter({ policies })
    assert.equal(limiter.policies[0].periodMs, 1_000)
    assert.equal(limiter.policies[0].name, 'fixed-window-1-per-1s')
  })
})
