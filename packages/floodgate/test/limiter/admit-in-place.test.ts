// Store.admitInPlace, the usual admission decided on the key's words: the limiter's decisions are
// the same with it as without it, and a store that fails there is handled as a failing store.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import { RateLimiter, MemoryStore } from '../../src/index.js'
import type { AlgorithmName, EvaluateRequest, EvaluateResponse, PolicyOptions, Policy, Store } from '../../src/index.js'
import type { PolicyResult } from '../../src/core/evaluate.js'
import { Clock } from './fixtures.js'

const ALGORITHMS: AlgorithmName[] = ['fixed-window', 'sliding-window', 'sliding-log', 'token-bucket', 'leaky-bucket', 'gcra']

/** The embedded store without admitInPlace: every decision takes evaluateSync, the general path. */
class GeneralPathStore implements Store {
  constructor(private readonly inner: MemoryStore) {}

  evaluate(batch: readonly EvaluateRequest[]): Promise<EvaluateResponse[]> {
    return this.inner.evaluate(batch)
  }

  evaluateSync(request: EvaluateRequest): EvaluateResponse {
    return this.inner.evaluateSync(request)
  }

  reset(key: string, policies: readonly Policy[]): Promise<void> {
    return this.inner.reset(key, policies)
  }

  close(): Promise<void> {
    return this.inner.close()
  }
}

/** The embedded store, counting the admissions it decided in place. */
class CountingInPlace extends MemoryStore {
  admitted = 0

  override admitInPlace(key: string, policies: readonly Policy[], cost: number): PolicyResult | undefined {
    const result = super.admitInPlace(key, policies, cost)
    if (result !== undefined) this.admitted++
    return result
  }
}

const policyOptions = fc.record({
  algorithm: fc.constantFrom(...ALGORITHMS),
  limit: fc.integer({ min: 1, max: 40 }),
  period: fc.integer({ min: 200, max: 2_000 }),
  mode: fc.constantFrom('hard', 'soft'),
  blockMs: fc.constantFrom(undefined, 300),
  shaping: fc.boolean(),
})

type PolicyDraw = typeof policyOptions extends fc.Arbitrary<infer T> ? T : never

const operation = fc.record({
  kind: fc.constantFrom('limit', 'limit', 'limit', 'limitSync', 'refund', 'get', 'reset'),
  key: fc.constantFrom('a', 'b'),
  cost: fc.integer({ min: 1, max: 3 }),
  gap: fc.integer({ min: 0, max: 400 }),
})

function toPolicy({ algorithm, limit, period, mode, blockMs, shaping }: PolicyDraw): PolicyOptions {
  return {
    algorithm,
    limit,
    period,
    mode,
    ...(mode === 'soft' ? { overage: 0.5 } : {}),
    ...(blockMs === undefined ? {} : { blockMs }),
    ...(algorithm === 'leaky-bucket' && shaping ? { shaping: true } : {}),
  }
}

describe('Store.admitInPlace', () => {
  it('decides every request as the general path does, on random policies and traces', async () => {
    let admittedInPlace = 0
    await fc.assert(
      fc.asyncProperty(policyOptions, fc.array(operation, { minLength: 20, maxLength: 80 }), async (options, trace) => {
        const clock = new Clock()
        const policies = [toPolicy(options)]
        const inPlace = new CountingInPlace({ clock: clock.read })
        const lane = new RateLimiter({ store: inPlace, clock: clock.read, policies, denyCache: false })
        const general = new RateLimiter({
          store: new GeneralPathStore(new MemoryStore({ clock: clock.read })),
          clock: clock.read,
          policies,
          denyCache: false,
        })
        for (const { kind, key, cost, gap } of trace) {
          clock.advance(gap)
          if (kind === 'refund') {
            await lane.refund(key, cost)
            await general.refund(key, cost)
          } else if (kind === 'reset') {
            await lane.reset(key)
            await general.reset(key)
          } else if (kind === 'limitSync') {
            assert.deepEqual(lane.limitSync(key, { cost }), general.limitSync(key, { cost }))
          } else {
            const options = { cost: kind === 'get' ? 0 : cost }
            assert.deepEqual(await lane.limit(key, options), await general.limit(key, options))
          }
        }
        admittedInPlace += inPlace.admitted
      }),
      { numRuns: 300 },
    )
    // The property says something only if the lane decided a good share of the admissions.
    assert.ok(admittedInPlace > 1_000, `admitted in place: ${admittedInPlace}`)
  })

  it('with several policies, or shadow ones, leaves every decision to the general path', async () => {
    const clock = new Clock()
    const store = new CountingInPlace({ clock: clock.read })
    const limiter = new RateLimiter({
      store,
      clock: clock.read,
      policies: [
        { name: 'burst', algorithm: 'gcra', limit: 10, period: '1s' },
        { name: 'trial', algorithm: 'fixed-window', limit: 1, period: '1s', shadow: true },
      ],
    })
    for (let i = 0; i < 5; i++) assert.equal((await limiter.limit('k')).allowed, true)
    assert.equal(store.admitted, 0)
  })

  it('a failing store fails once per decision, in place or not: one store-error each, the failure mode decides', async () => {
    const clock = new Clock()
    class Failing extends MemoryStore {
      inPlaceCalls = 0
      generalCalls = 0
      override admitInPlace(): PolicyResult | undefined {
        this.inPlaceCalls++
        throw new Error('backend down')
      }
      override evaluateSync(): EvaluateResponse {
        this.generalCalls++
        throw new Error('backend down')
      }
    }
    const store = new Failing({ clock: clock.read })
    const limiter = new RateLimiter({
      store,
      clock: clock.read,
      policies: [{ algorithm: 'fixed-window', limit: 5, period: '1m' }],
      onStoreError: 'closed',
      breaker: { failures: 3, cooldown: '10s' },
    })
    const errors: Error[] = []
    limiter.on('store-error', (error) => errors.push(error))
    const sources = []
    for (let i = 0; i < 5; i++) sources.push((await limiter.limit('k')).source)
    assert.deepEqual(sources, ['fallback-closed', 'fallback-closed', 'fallback-closed', 'fallback-closed', 'fallback-closed'])
    // The first decision fails in place; with a failure counted the general path decides (and
    // counts) the next two, which open the breaker; then the store is not asked at all.
    assert.equal(store.inPlaceCalls, 1)
    assert.equal(store.generalCalls, 2)
    assert.equal(errors.length, 3)
    assert.ok(errors.every((error) => /backend down/.test(error.message)))
  })
})
