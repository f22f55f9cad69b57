// Properties of the limiter on random traces: shadow policies never change enforcement, soft mode
// stays within its overage, elastic headroom never exceeds the ceiling nor the pool.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import { RateLimiter, MemoryStore } from '../../src/index.js'
import type { AlgorithmName, PolicyOptions } from '../../src/index.js'
import { Clock } from './fixtures.js'

const ALGORITHMS: AlgorithmName[] = ['fixed-window', 'sliding-window', 'sliding-log', 'token-bucket', 'leaky-bucket', 'gcra']

function limiterOn(clock: Clock, policies: PolicyOptions[], extra: object = {}) {
  return new RateLimiter({ store: new MemoryStore({ clock: clock.read }), clock: clock.read, policies, denyCache: false, ...extra })
}

const operation = fc.record({
  kind: fc.constantFrom('limit', 'limit', 'limit', 'refund', 'get'),
  key: fc.constantFrom('a', 'b'),
  cost: fc.integer({ min: 1, max: 3 }),
  gap: fc.integer({ min: 0, max: 300 }),
})

describe('limiter properties', () => {
  it('a shadow policy never changes what the enforced policies decide or store', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...ALGORITHMS),
        fc.constantFrom(...ALGORITHMS),
        fc.array(operation, { maxLength: 40 }),
        async (real, trial, trace) => {
          const clock = new Clock()
          const enforced: PolicyOptions = {
            name: 'real',
            algorithm: real,
            limit: 4,
            period: 1_000,
            blockMs: real === 'gcra' ? 500 : undefined,
          }
          const alone = limiterOn(clock, [enforced])
          const withShadow = limiterOn(clock, [enforced, { name: 'trial', algorithm: trial, limit: 2, period: 700, shadow: true }])
          for (const { kind, key, cost, gap } of trace) {
            clock.advance(gap)
            if (kind === 'refund') {
              await alone.refund(key, cost)
              await withShadow.refund(key, cost)
              continue
            }
            const options = { cost: kind === 'get' ? 0 : cost }
            const a = await alone.limit(key, options)
            const b = await withShadow.limit(key, options)
            assert.equal(b.allowed, a.allowed)
            assert.deepEqual(b.policies[0], a.policies[0])
          }
        },
      ),
      { numRuns: 150 },
    )
  })

  it('soft mode admits at most floor(limit × (1 + overage)) per fixed window, and exactly that many when asked', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 20 }), fc.double({ min: 0.01, max: 2, noNaN: true }), async (limit, overage) => {
        const clock = new Clock()
        const limiter = limiterOn(clock, [{ algorithm: 'fixed-window', limit, period: '1h', mode: 'soft', overage }])
        const allowance = Math.max(limit, Math.floor(limit * (1 + overage) + 1e-9))
        let admitted = 0
        let over = 0
        for (let i = 0; i < allowance + 3; i++) {
          const d = await limiter.limit('k')
          if (d.allowed) admitted++
          if (d.over) over++
          assert.ok(d.remaining <= limit)
          assert.equal(d.limit, limit)
        }
        assert.equal(admitted, allowance)
        assert.equal(over, allowance - limit)
      }),
      { numRuns: 100 },
    )
  })

  it('elastic keys never pass their ceiling, and headroom taken never exceeds the pool', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 0, max: 6 }),
        fc.integer({ min: 0, max: 8 }),
        fc.array(fc.constantFrom('a', 'b', 'c'), { maxLength: 60 }),
        async (limit, extra, poolSize, keys) => {
          const clock = new Clock()
          const pool = limiterOn(clock, [{ name: 'spare', algorithm: 'fixed-window', limit: Math.max(1, poolSize), period: '1h' }])
          if (poolSize === 0) await pool.limit('elastic-pool')
          const limiter = limiterOn(
            clock,
            [{ name: 'plan', algorithm: 'fixed-window', limit, period: '1h', mode: 'elastic', ceiling: limit + extra }],
            {
              pool: { limiter: pool },
            },
          )
          const admitted = new Map<string, number>()
          let overTotal = 0
          for (const key of keys) {
            const d = await limiter.limit(key)
            if (d.allowed) admitted.set(key, (admitted.get(key) ?? 0) + 1)
            if (d.over) overTotal++
          }
          for (const count of admitted.values()) assert.ok(count <= limit + extra)
          const headroom = [...admitted.values()].reduce((sum, count) => sum + Math.max(0, count - limit), 0)
          assert.equal(headroom, overTotal)
          assert.ok(headroom <= poolSize)
        },
      ),
      { numRuns: 100 },
    )
  })
})
