// MemcachedStore against the core: random sequential traces through a real memcached and through
// evaluateKey (MemoryStore) give identical decisions.

import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import { ALGORITHMS, createPolicy, type PolicyOptions } from '../../../src/core/policy.js'
import { MemoryStore } from '../../../src/stores/memory/memory-store.js'
import { MemcachedStore } from '../../../src/memcached.js'
import { startMemcached, type MemcachedProcess } from '../../support/memcached-server.js'
import { advanceArbitrary, costArbitrary, policyOptionsArbitrary } from '../trace-arbitraries.js'

let server: MemcachedProcess
let store: MemcachedStore

before(async () => {
  server = await startMemcached()
  // memjs's 0.5 s default is sometimes outlasted by a first connection on a busy machine.
  store = new MemcachedStore({ servers: [server.address], memjs: { timeout: 10 } })
})

after(async () => {
  await store.close()
  await server.stop()
})

const policyOptions = (name: string): fc.Arbitrary<PolicyOptions> => policyOptionsArbitrary(name, ALGORITHMS)

const stepArbitrary = fc.record({
  key: fc.constantFrom('alice', 'bob', 'x y\u0000|#%{}é'),
  policies: fc.uniqueArray(fc.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 3 }),
  cost: costArbitrary,
  advance: advanceArbitrary,
})

let run = 0

test('every algorithm, several policies per key, blocks: memcached decides exactly as the core', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.tuple(policyOptions('a'), policyOptions('b'), policyOptions('c'), policyOptions('d')),
      fc.array(stepArbitrary, { minLength: 1, maxLength: 40 }),
      async (options, steps) => {
        const policies = options.map((option) => createPolicy(option))
        const reference = new MemoryStore()
        // A fresh prefix per run: memcached keeps what earlier runs wrote.
        const prefix = `eq${run++}:`
        const tested = new MemcachedStore({ client: store.client, prefix })
        let now = Date.now() + 86_400_000
        // memcached expires records on its own (real) clock, after at least their ttl: the trace's
        // clock must never fall further behind the real one than it ever was, or a record still live
        // at `now` could be gone (steps take seconds on a busy machine). So the trace's time moves
        // at least as fast as real time, past its own advances; on an idle machine, by a few ms.
        let behind = performance.now() - now
        for (const step of steps) {
          now = Math.max(now + step.advance, performance.now() - behind)
          behind = Math.min(behind, performance.now() - now)
          const request = { key: step.key, policies: step.policies.map((i) => policies[i]), cost: step.cost, now }
          const [expected] = await reference.evaluate([request])
          const [actual] = await tested.evaluate([request])
          assert.deepEqual(actual, expected, JSON.stringify({ request: { ...request, policies: step.policies }, options }))
        }
      },
    ),
    { numRuns: 300 },
  )
})
