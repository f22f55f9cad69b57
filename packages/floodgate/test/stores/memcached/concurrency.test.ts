// Cross-process proof on real memcached servers: four processes, each with its own MemcachedStore,
// hammer the same keys at once; every algorithm admits exactly its limit, and a two-policy key
// charges its other policy only for what it admitted.

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { fileURLToPath } from 'node:url'
import { createPolicies } from '../../../src/core/policy.js'
import { MemcachedStore } from '../../../src/memcached.js'
import { startMemcached, type MemcachedProcess } from '../../support/memcached-server.js'
import type { HammerCase, WorkerConfig, WorkerReport } from './hammer-worker.js'
import { Workers } from '../../support/workers.js'

const WORKER = fileURLToPath(new URL('./hammer-worker.ts', import.meta.url))
const WORKERS = 4
const LIMIT = 40
// Pinned for every request in every process: no window boundary, refill or lease expiry can
// admit extra requests, so "exactly the limit" is the only correct total.
const NOW = Date.UTC(2026, 0, 1, 12, 30)
const KEYS = ['hot', 'also hot', 'k:3']

const CASES: HammerCase[] = [
  { name: 'fixed-window', policies: [{ algorithm: 'fixed-window', limit: LIMIT, period: '1h' }], keys: KEYS },
  { name: 'sliding-window', policies: [{ algorithm: 'sliding-window', limit: LIMIT, period: '1h' }], keys: KEYS },
  { name: 'sliding-log', policies: [{ algorithm: 'sliding-log', limit: LIMIT, period: '1h' }], keys: KEYS },
  { name: 'token-bucket', policies: [{ algorithm: 'token-bucket', limit: LIMIT, period: '1h' }], keys: KEYS },
  { name: 'gcra', policies: [{ algorithm: 'gcra', limit: LIMIT, period: '1h' }], keys: KEYS },
  { name: 'leaky-bucket', policies: [{ name: 'policing', algorithm: 'leaky-bucket', limit: LIMIT, period: '1h' }], keys: KEYS },
  { name: 'concurrency', policies: [{ algorithm: 'concurrency', limit: LIMIT, period: '1h' }], keys: KEYS },
  {
    name: 'counter then cas',
    policies: [
      { name: 'tight', algorithm: 'fixed-window', limit: 25, period: '1h' },
      { name: 'loose', algorithm: 'gcra', limit: LIMIT, period: '1h' },
    ],
    keys: KEYS,
  },
  {
    name: 'cas then counter',
    policies: [
      { name: 'loose-tb', algorithm: 'token-bucket', limit: LIMIT, period: '1h' },
      { name: 'tight-fw', algorithm: 'fixed-window', limit: 25, period: '1h' },
    ],
    keys: KEYS,
  },
]

let servers: MemcachedProcess[]
const workers = new Workers(WORKER)

before(async () => {
  // Two servers: the keys are spread over them by the store's hash ring, the same way in every process.
  servers = await Promise.all([startMemcached(), startMemcached()])
})

after(async () => {
  workers.killAll()
  await Promise.all(servers.map((server) => server.stop()))
})

test(`${WORKERS} processes on one hot key admit exactly the limit, for every algorithm`, async (t) => {
  const config: WorkerConfig = {
    servers: servers.map((server) => server.address),
    now: NOW,
    cases: CASES,
    // Four times the limit per key across the workers.
    requestsPerKey: LIMIT,
    inflight: 8,
    // High enough that no decision is refused: the test is about exactness, the retry count is reported.
    casRetries: 1000,
  }
  const reports = await workers.run<WorkerConfig, WorkerReport>(WORKERS, config)
  for (const c of CASES) {
    const attempts = WORKERS * config.requestsPerKey * c.keys.length
    const retries = reports.reduce((sum, report) => sum + report.retries[c.name], 0)
    const refused = reports.reduce((sum, report) => sum + report.refused[c.name], 0)
    const perDecision = (retries / attempts).toFixed(2)
    t.diagnostic(`${c.name}: ${attempts} decisions, ${retries} CAS retries (${perDecision} per decision), ${refused} refused`)
    assert.equal(refused, 0, `${c.name}: ${refused} decisions refused: ${reports.flatMap((report) => report.errors).join(' | ')}`)
    const expected = c.name.includes('then') ? 25 : LIMIT
    for (const key of c.keys) {
      const perWorker = reports.map((report) => report.admitted[c.name][key])
      const total = perWorker.reduce((a, b) => a + b, 0)
      assert.equal(total, expected, `${c.name} ${key}: admitted ${total} (per worker ${perWorker.join('+')}), want ${expected}`)
    }
  }

  // The policies that did not deny were charged for admitted requests only: the refunds all landed.
  const store = new MemcachedStore({ servers: config.servers, memjs: { timeout: 10 } })
  try {
    for (const name of ['counter then cas', 'cas then counter']) {
      const policies = createPolicies(CASES.find((c) => c.name === name)!.policies)
      const tight = name === 'counter then cas' ? 0 : 1
      const peeks = await store.evaluate(KEYS.map((key) => ({ key, policies, cost: 0, now: NOW })))
      for (const [i, peek] of peeks.entries()) {
        assert.equal(peek.results[tight].remaining, 0, `${name} ${KEYS[i]}: tight remaining`)
        assert.equal(peek.results[1 - tight].remaining, LIMIT - 25, `${name} ${KEYS[i]}: loose remaining`)
      }
    }
  } finally {
    await store.close()
  }
})
