// Several policies on one key under concurrency, on a real memcached: charged in order and refunded on a
// denial, so no policy ever admits more than it would alone, and once every request is answered the
// stored state is exactly that of the admitted requests (the over-count is brief).

import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import { createPolicy, type AlgorithmName, type PolicyOptions } from '../../../src/core/policy.js'
import { MemoryStore } from '../../../src/stores/memory/memory-store.js'
import { MemcachedStore } from '../../../src/memcached.js'
import type { EvaluateResponse } from '../../../src/stores/store.js'
import { startMemcached, type MemcachedProcess } from '../../support/memcached-server.js'

const CLIENTS = 4

let server: MemcachedProcess
let stores: MemcachedStore[]

before(async () => {
  server = await startMemcached()
  // One client each: separate connections, so their requests really interleave in memcached. A
  // patient memjs: its 0.5 s default is sometimes outlasted by a first connection on a busy machine.
  stores = Array.from(
    { length: CLIENTS },
    () => new MemcachedStore({ servers: [server.address], casRetries: 1000, memjs: { timeout: 10 } }),
  )
})

after(async () => {
  await Promise.all(stores.map((store) => store.close()))
  await server.stop()
})

// No block periods: a block starts on a denial, and which requests a race denies is the race's business.
const policyOptions = (name: string): fc.Arbitrary<PolicyOptions> =>
  fc.record({
    name: fc.constant(name),
    algorithm: fc.constantFrom<AlgorithmName>(
      'fixed-window',
      'sliding-window',
      'sliding-log',
      'token-bucket',
      'gcra',
      'leaky-bucket',
      'concurrency',
    ),
    limit: fc.integer({ min: 1, max: 8 }),
    period: fc.constantFrom('1h', '1d'),
  })

let run = 0

test('concurrent multi-policy requests: what was admitted fits every policy, and the refunds all land', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc
        .uniqueArray(fc.constantFrom('a', 'b', 'c'), { minLength: 1, maxLength: 3 })
        .chain((names) => fc.tuple(...names.map(policyOptions))),
      fc.array(fc.integer({ min: 1, max: 3 }), { minLength: CLIENTS, maxLength: 32 }),
      async (options, costs) => {
        const policies = options.map((option) => createPolicy(option))
        const key = `multi-${run++}`
        const now = Date.UTC(2026, 0, 1, 12, 30)
        // Every client sends its share at once; all at one instant, so no window, refill or lease moves.
        const answers: { cost: number; response: EvaluateResponse }[] = []
        await Promise.all(
          stores.map(async (store, client) => {
            const mine = costs.filter((_, i) => i % CLIENTS === client)
            const responses = await store.evaluate(mine.map((cost) => ({ key, policies, cost, now })))
            responses.forEach((response, i) => answers.push({ cost: mine[i], response }))
          }),
        )
        // The admitted requests, one after another on the memory store, must all pass: no over-admission.
        const reference = new MemoryStore()
        for (const { cost } of answers.filter((answer) => answer.response.allowed)) {
          const [replayed] = await reference.evaluate([{ key, policies, cost, now }])
          assert.equal(replayed.allowed, true, `admitted ${JSON.stringify(answers.map((a) => [a.cost, a.response.allowed]))}`)
        }
        // And memcached now holds exactly their charges: every denied request's refunds landed.
        const [expected] = await reference.evaluate([{ key, policies, cost: 0, now }])
        const [actual] = await stores[0].evaluate([{ key, policies, cost: 0, now }])
        assert.deepEqual(
          actual.results.map((r) => r.remaining),
          expected.results.map((r) => r.remaining),
        )
      },
    ),
    { numRuns: 80 },
  )
})
