// The limiter's direct path (its own one-policy set on a MemoryStore, see DirectPath) answers what
// the general decider answers: the same decisions, deny-cache entries, events and failure modes.
// Each case runs one limiter with the set as its own (direct) beside one given the set per call
// (the general path), on stores of their own and one clock.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { ALGORITHMS, RateLimiter, MemoryStore, createPolicies } from '../../src/index.js'
import type {
  Decision,
  EvaluateRequest,
  EvaluateResponse,
  Policy,
  PolicyOptions,
  PolicyResult,
  RateLimiterOptions,
} from '../../src/index.js'
import { Clock } from './fixtures.js'

/**
 * A MemoryStore that throws while `failing` (a fault of the embedded store, e.g. a bad custom
 * subclass): in decideOne, where the direct path asks, and in evaluateSync, where the general path
 * asks. The direct path is not taken for a subclass that changes evaluateSync alone (see below).
 */
class BreakableMemoryStore extends MemoryStore {
  failing = false

  override decideOne(key: string, policies: readonly Policy[], cost: number): PolicyResult {
    if (this.failing) throw new Error('store broke')
    return super.decideOne(key, policies, cost)
  }

  override evaluateSync(request: EvaluateRequest): EvaluateResponse {
    if (this.failing) throw new Error('store broke')
    return super.evaluateSync(request)
  }
}

/** A subclass that changes the Store contract's evaluateSync only: the direct path must not go past it. */
class ChangedEvaluateSync extends MemoryStore {
  override evaluateSync(request: EvaluateRequest): EvaluateResponse {
    return super.evaluateSync({ ...request, cost: request.cost * 2 })
  }
}

interface Pair {
  direct: RateLimiter
  general: RateLimiter
  stores: BreakableMemoryStore[]
  events: string[][]
  decide: (cost: number, key?: string) => Promise<[Decision, Decision]>
}

function pair(clock: Clock, policy: PolicyOptions, options: Partial<RateLimiterOptions> = {}): Pair {
  const policies = createPolicies([policy])
  const stores = [new BreakableMemoryStore({ clock: clock.read }), new BreakableMemoryStore({ clock: clock.read })]
  const common = { clock: clock.read, timers: clock.timers, breaker: { failures: 2, cooldown: 1_000 }, ...options }
  const direct = new RateLimiter({ ...common, store: stores[0], policies: [policy] })
  const general = new RateLimiter({ ...common, store: stores[1] })
  const events: string[][] = [[], []]
  for (const [i, limiter] of [direct, general].entries()) {
    for (const event of ['store-error', 'breaker-open', 'breaker-close', 'fallback'] as const) {
      limiter.on(event, (arg: unknown) => events[i].push(`${event} ${arg instanceof Error ? arg.message : String(arg)}`))
    }
  }
  let turn = 0
  const decide = async (cost: number, key = 'k'): Promise<[Decision, Decision]> => {
    // Alternates limit and limitSync: both reach the direct path.
    const sync = turn++ % 2 === 1
    const a = sync ? direct.limitSync(key, { cost }) : await direct.limit(key, { cost })
    const b = sync ? general.limitSync(key, { cost, policies }) : await general.limit(key, { cost, policies })
    return [a, b]
  }
  return { direct, general, stores, events, decide }
}

function takesDirectPath(limiter: RateLimiter): boolean {
  return (limiter as unknown as { direct: unknown }).direct !== undefined
}

const KERNEL_ALGORITHMS = ALGORITHMS.filter((algorithm) => algorithm !== 'concurrency')

function policyOf(algorithm: (typeof KERNEL_ALGORITHMS)[number], extra: Partial<PolicyOptions> = {}): PolicyOptions {
  const bucket = algorithm === 'token-bucket' || algorithm === 'leaky-bucket'
  return { algorithm, limit: 4, period: '10s', ...(bucket ? { burst: 4 } : {}), ...extra } as PolicyOptions
}

describe('the direct path', () => {
  for (const algorithm of KERNEL_ALGORITHMS) {
    for (const extra of [{}, { mode: 'soft', overage: 0.5 }, { blockMs: 3_000 }] as Partial<PolicyOptions>[]) {
      it(`decides as the general path: ${algorithm} ${JSON.stringify(extra)}`, async () => {
        const clock = new Clock()
        const { direct, decide } = pair(clock, policyOf(algorithm, extra))
        assert.equal(takesDirectPath(direct), true)
        // Admissions, a peek, denials (remembered, then answered from the deny cache), a cost
        // above the capacity (never), and the wait running out, on two keys.
        for (const [cost, advance, key] of [
          [1, 0, 'k'],
          [2, 100, 'k'],
          [0, 0, 'k'],
          [3, 0, 'k'],
          [1, 0, 'k'],
          [1, 500, 'k'],
          [1, 0, 'other'],
          [99, 0, 'k'],
          [1, 9_000, 'k'],
          [2, 3_000, 'k'],
          [1, 0, 'other'],
          [1, 0, 'k'],
        ] as const) {
          clock.advance(advance)
          const [a, b] = await decide(cost, key)
          assert.deepEqual(a, b, `cost ${cost} at +${clock.now}`)
        }
      })
    }
  }

  // limit(key) and limitSync(key) with no options skip decideWith's checks: their answers must stay
  // those of the general path, deny-cache answers and a set that can never admit 1 included.
  for (const [name, policy] of [
    ['gcra', policyOf('gcra')],
    ['blocking fixed-window', policyOf('fixed-window', { blockMs: 3_000 })],
    ['fixed-window of limit 0', { algorithm: 'fixed-window', limit: 0, period: '10s' }],
  ] as [string, PolicyOptions][]) {
    it(`decides limit(key) and limitSync(key) as the general path: ${name}`, async () => {
      const clock = new Clock()
      const { direct, general } = pair(clock, policy)
      const policies = createPolicies([policy])
      const sources = new Set<string>()
      let turn = 0
      for (const [advance, key] of [
        [0, 'k'],
        [0, 'k'],
        [100, 'k'],
        [0, 'k'],
        [0, 'k'],
        [0, 'k'],
        [0, 'other'],
        [500, 'k'],
        [9_000, 'k'],
      ] as const) {
        clock.advance(advance)
        // limit and limitSync in turn, both with no options.
        const sync = turn++ % 2 === 1
        const a = sync ? direct.limitSync(key) : await direct.limit(key)
        const b = sync ? general.limitSync(key, { policies }) : await general.limit(key, { policies })
        assert.deepEqual(a, b, `${sync ? 'limitSync' : 'limit'} ${key} at +${clock.now}`)
        sources.add(`${a.source}${a.never === true ? ' never' : ''}`)
      }
      // The trace reached what the shortcut must leave to the general steps.
      assert.ok(sources.has(policy.limit === 0 ? 'store never' : 'deny-cache'), [...sources].join(', '))
    })
  }

  it('fails as the general path: events, the breaker, each failure mode', async () => {
    for (const onStoreError of ['open', 'closed', 'local'] as const) {
      const clock = new Clock()
      const { stores, events, decide } = pair(clock, policyOf('gcra'), { onStoreError })
      await decide(1)
      for (const store of stores) store.failing = true
      // A failure, the one that opens the breaker, then calls the open breaker skips.
      for (let i = 0; i < 4; i++) {
        const [a, b] = await decide(1)
        assert.deepEqual(a, b, `${onStoreError}, failing call ${i}`)
      }
      for (const store of stores) store.failing = false
      clock.advance(1_000)
      // The probe closes the breaker; decisions are the store's again.
      for (let i = 0; i < 3; i++) {
        const [a, b] = await decide(1)
        assert.deepEqual(a, b, `${onStoreError}, recovered call ${i}`)
      }
      assert.deepEqual(events[0], events[1])
      assert.ok(events[0].includes('breaker-open '), `${onStoreError}: ${events[0].join(', ')}`)
      assert.ok(events[0].includes('breaker-close '), `${onStoreError}: ${events[0].join(', ')}`)
    }
  })

  it('is not taken where the general steps are needed', () => {
    const clock = new Clock()
    const plain: PolicyOptions = policyOf('fixed-window')
    const cases: [string, Partial<RateLimiterOptions>][] = [
      ['two policies', { policies: [plain, { ...plain, name: 'second', limit: 8 }] }],
      ['a shadow policy', { policies: [{ ...plain, shadow: true }] }],
      ['a concurrency policy', { policies: [{ algorithm: 'concurrency', limit: 2, period: '10s' }] }],
      ['a store call hook', { policies: [plain], onStoreCall: () => undefined }],
      ['a store whose evaluateSync is changed', { policies: [plain], store: new ChangedEvaluateSync({ clock: clock.read }) }],
      ['no own policies', {}],
    ]
    for (const [name, options] of cases) {
      const limiter = new RateLimiter({ clock: clock.read, store: new MemoryStore({ clock: clock.read }), ...options })
      assert.equal(takesDirectPath(limiter), false, name)
    }
    // One that changes both is taken (as BreakableMemoryStore is above).
    const both = new RateLimiter({ clock: clock.read, store: new BreakableMemoryStore({ clock: clock.read }), policies: [plain] })
    assert.equal(takesDirectPath(both), true)
  })
})
