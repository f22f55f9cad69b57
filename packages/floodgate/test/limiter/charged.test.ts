// Issue 26 §1, in the library: a decision is admitted only if its cost was charged, for every
// algorithm on every store (embedded, a real Redis, a real memcached) and any cost in [0, 2^64).

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import { ALGORITHMS, type AlgorithmName, createPolicy } from '../../src/core/policy.js'
import { RateLimiter } from '../../src/limiter/rate-limiter.js'
import { MemoryStore } from '../../src/stores/memory/memory-store.js'
import { MemcachedStore } from '../../src/stores/memcached/memcached-store.js'
import { RedisStore } from '../../src/stores/redis/redis-store.js'
import type { EvaluateRequest, EvaluateResponse, Store, SubmitCallback } from '../../src/stores/store.js'
import { startMemcached, type MemcachedProcess } from '../support/memcached-server.js'
import { startRedis, type RedisProcess } from '../support/redis-server.js'

const T0 = 1_700_000_000_000
const UINT64_MAX = 2n ** 64n - 1n
const EDGES = [10n, 11n, 15n, 10n ** 15n + 1n, 2n ** 53n - 1n, 2n ** 53n, 2n ** 53n + 1n, 2n ** 63n - 1n, UINT64_MAX]

/** Mostly costs around the limit (so both answers occur), then the edges, then anything in [0, 2^64). */
const cost = fc.oneof(
  { arbitrary: fc.bigInt({ min: 0n, max: 16n }), weight: 3 },
  { arbitrary: fc.constantFrom(...EDGES), weight: 2 },
  { arbitrary: fc.bigInt({ min: 0n, max: UINT64_MAX }), weight: 2 },
)

/** A RedisStore deciding every request at T0, not on the server's clock, so refills never blur a count. */
class FrozenRedisStore extends RedisStore {
  override evaluate(batch: readonly EvaluateRequest[]): Promise<EvaluateResponse[]> {
    return super.evaluate(batch.map((request) => ({ ...request, now: T0 })))
  }

  override submit(request: EvaluateRequest, done: SubmitCallback): void {
    super.submit({ ...request, now: T0 }, done)
  }
}

/**
 * For one algorithm (10 per hour; token-bucket and gcra with a burst of 15) on `store`: every
 * request is either denied with nothing charged, or admitted with `remaining` down by exactly its
 * cost (a peek before and after).
 */
async function assertAdmittedOnlyIfCharged(store: Store, algorithm: AlgorithmName, numRuns: number): Promise<void> {
  const burst = algorithm === 'token-bucket' || algorithm === 'gcra' ? 15 : undefined
  const policies = [createPolicy({ name: 'p', algorithm, limit: 10, period: '1h', burst })]
  const limiter = new RateLimiter({ store, clock: () => T0, denyCache: false, timeout: 5_000 })
  let run = 0
  await fc.assert(
    fc.asyncProperty(cost, async (units) => {
      // A few keys, so that some fill up and later costs meet a spent key.
      const key = `${algorithm}-${run++ % 3}`
      const before = await limiter.get(key, { policies })
      const decision = await limiter.limit(key, { cost: Number(units), policies })
      const after = await limiter.get(key, { policies })
      assert.equal(decision.source, 'store', `${algorithm}: decided by ${decision.source}`)
      const charged = before.remaining - after.remaining
      if (decision.allowed) assert.equal(charged, Number(units), `${algorithm}: admitted ${units}, charged ${charged}`)
      else assert.equal(charged, 0, `${algorithm}: denied ${units}, charged ${charged}`)
    }),
    { numRuns, includeErrorInReport: true },
  )
}

describe('admitted only if charged: any cost in [0, 2^64), every algorithm', () => {
  describe('embedded store', () => {
    for (const algorithm of ALGORITHMS) {
      it(algorithm, () => assertAdmittedOnlyIfCharged(new MemoryStore({ clock: () => T0 }), algorithm, 300))
    }
  })

  describe('Redis', () => {
    let redis: RedisProcess
    let store: FrozenRedisStore
    before(async () => {
      redis = await startRedis()
      store = new FrozenRedisStore({ url: redis.url, prefix: 'charged:' })
    })
    after(async () => {
      await store?.close()
      await redis?.stop()
    })
    for (const algorithm of ALGORITHMS) {
      it(algorithm, () => assertAdmittedOnlyIfCharged(store, algorithm, 40))
    }
  })

  describe('memcached', () => {
    let memcached: MemcachedProcess
    let store: MemcachedStore
    before(async () => {
      memcached = await startMemcached()
      store = new MemcachedStore({ servers: [memcached.address], prefix: 'charged:', clock: () => T0 })
    })
    after(async () => {
      await store?.close()
      await memcached?.stop()
    })
    for (const algorithm of ALGORITHMS) {
      it(algorithm, () => assertAdmittedOnlyIfCharged(store, algorithm, 40))
    }

    it('a set of shadow policies alone, and a refund, take any cost: the store is sent one it can write', async () => {
      const limiter = new RateLimiter({ store, clock: () => T0, timeout: 5_000 })
      const errors: Error[] = []
      limiter.on('store-error', (error) => errors.push(error))
      const shadow = [createPolicy({ name: 's', algorithm: 'fixed-window', limit: 10, period: '1h', shadow: true })]
      const decision = await limiter.limit('shadow-huge', { cost: 2 ** 64, policies: shadow })
      assert.equal(decision.source, 'store', String(errors[0]))
      assert.equal(decision.shadow, true, 'the shadow policy would have denied it')
      assert.equal((await limiter.get('shadow-huge', { policies: shadow })).remaining, 10, 'nothing was charged')
      const policies = [createPolicy({ name: 'p', algorithm: 'fixed-window', limit: 10, period: '1h' })]
      assert.equal((await limiter.limit('refund-huge', { cost: 4, policies })).allowed, true)
      await limiter.refund('refund-huge', 1e300, { policies })
      assert.deepEqual(errors, [])
      assert.equal((await limiter.get('refund-huge', { policies })).remaining, 10, 'the refund gave everything back')
    })
  })
})

/** The largest limit createPolicy takes for `algorithm` over `periodMs` (the ticked ones count limit × period). */
function largestLimit(algorithm: AlgorithmName, periodMs: number): number {
  return algorithm === 'fixed-window' || algorithm === 'sliding-log' || algorithm === 'concurrency'
    ? Number.MAX_SAFE_INTEGER
    : Math.floor(Number.MAX_SAFE_INTEGER / periodMs)
}

describe('admitted only if charged: any policy createPolicy takes, up to its largest limit', () => {
  it('embedded store, every algorithm, limits from 1 to the bound, costs around them and in [0, 2^64)', async () => {
    const store = new MemoryStore({ clock: () => T0 })
    const limiter = new RateLimiter({ store, clock: () => T0, denyCache: false })
    const policyArb = fc
      .record({
        algorithm: fc.constantFrom(...ALGORITHMS),
        periodMs: fc.constantFrom(1, 1_000, 3_600_000),
        pick: fc.double({ min: 0, max: 1, noNaN: true }),
      })
      .map(({ algorithm, periodMs, pick }) => {
        const most = largestLimit(algorithm, periodMs)
        const limit = Math.max(1, pick < 0.3 ? most : Math.floor(most * pick))
        return createPolicy({ name: 'p', algorithm, limit, period: periodMs })
      })
    let run = 0
    await fc.assert(
      fc.asyncProperty(
        policyArb,
        fc.array(fc.oneof(cost, fc.bigInt({ min: 0n, max: 2n ** 53n })), { minLength: 1, maxLength: 6 }),
        async (policy, costs) => {
          const policies = [policy]
          const key = `big-${run++}`
          for (const units of costs) {
            // Costs near what is left as well, so that admissions near the bound occur.
            const left = (await limiter.get(key, { policies })).remaining
            for (const asked of [Number(units), Math.max(0, left - Number(units % 3n))]) {
              const before = (await limiter.get(key, { policies })).remaining
              const decision = await limiter.limit(key, { cost: asked, policies })
              const after = (await limiter.get(key, { policies })).remaining
              const what = `${policy.algorithm} ${policy.limit}/${policy.periodMs}ms, cost ${asked}`
              if (decision.allowed) assert.equal(before - after, asked, `${what}: admitted, charged ${before - after}`)
              else assert.equal(after, before, `${what}: denied, charged ${before - after}`)
            }
          }
        },
      ),
      { numRuns: 300, includeErrorInReport: true },
    )
  })
})

describe('a policy whose count a double cannot move is refused', () => {
  it('limit, burst, ceiling and soft overage above 2^53 - 1, with the field and the reason', () => {
    const refusals: [Record<string, unknown>, RegExp][] = [
      [{ algorithm: 'fixed-window', limit: 1e18, period: '1h' }, /^policy\.limit: must be at most 9007199254740991/],
      [{ algorithm: 'gcra', limit: 10, burst: 2 ** 53, period: '1h' }, /^policy\.burst: must be at most 9007199254740991/],
      [{ algorithm: 'fixed-window', limit: 2 ** 52, period: '1h', mode: 'soft', overage: 1.5 }, /^policy\.overage: .*capacity/],
      [{ algorithm: 'token-bucket', limit: 10, period: '1h', mode: 'elastic', ceiling: 1e16 }, /^policy\.ceiling: must be at most/],
    ]
    for (const [options, message] of refusals) {
      assert.throws(
        () => createPolicy(options as never),
        (error: Error) => message.test(error.message) && /admitted uncharged/.test(error.message),
        JSON.stringify(options),
      )
    }
    assert.equal(createPolicy({ algorithm: 'fixed-window', limit: Number.MAX_SAFE_INTEGER, period: '1h' }).limit, Number.MAX_SAFE_INTEGER)
  })
})
