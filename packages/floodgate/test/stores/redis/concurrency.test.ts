// Cross-process proof of atomicity: four processes, each with its own Cluster client and
// RedisStore, hammer the same keys at once; across all of them every exact algorithm admits
// exactly its limit, and a two-policy key charges nothing for what it denies.

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { fileURLToPath } from 'node:url'
import { Cluster } from 'ioredis'
import { createPolicies } from '../../../src/core/policy.js'
import { RedisStore } from '../../../src/redis.js'
import { startCluster, type RedisClusterHandle } from '../../support/redis-cluster.js'
import type { HammerCase, WorkerConfig, WorkerReport } from './hammer-worker.js'
import { Workers } from '../../support/workers.js'

const WORKER = fileURLToPath(new URL('./hammer-worker.ts', import.meta.url))
const WORKERS = 4
const LIMIT = 40
// Pinned for every request in every process: no window boundary, refill or lease expiry can
// admit extra requests, so "exactly the limit" is the only correct total.
const NOW = Date.UTC(2026, 0, 1, 12, 30)
const KEYS = ['alpha', 'b{r}ace', 'c:1']

// Every case uses the same user keys, so each policy needs a name of its own (the Redis key).
const CASES: HammerCase[] = [
  { name: 'fixed-window', policies: [{ algorithm: 'fixed-window', limit: LIMIT, period: '1h' }], keys: KEYS },
  { name: 'sliding-log', policies: [{ algorithm: 'sliding-log', limit: LIMIT, period: '1h' }], keys: KEYS },
  { name: 'token-bucket', policies: [{ algorithm: 'token-bucket', limit: LIMIT, period: '1h' }], keys: KEYS },
  { name: 'gcra', policies: [{ algorithm: 'gcra', limit: LIMIT, period: '1h' }], keys: KEYS },
  { name: 'leaky-bucket', policies: [{ name: 'policing', algorithm: 'leaky-bucket', limit: LIMIT, period: '1h' }], keys: KEYS },
  {
    name: 'leaky-bucket shaping',
    policies: [{ name: 'shaping', algorithm: 'leaky-bucket', limit: LIMIT, period: '1h', shaping: true }],
    keys: KEYS,
  },
  { name: 'concurrency', policies: [{ algorithm: 'concurrency', limit: LIMIT, period: '1h' }], keys: KEYS },
  {
    name: 'two-policies',
    policies: [
      { name: 'tight', algorithm: 'fixed-window', limit: 25, period: '1h' },
      { name: 'loose', algorithm: 'gcra', limit: LIMIT, period: '1h' },
    ],
    keys: KEYS,
  },
]

let cluster: RedisClusterHandle
const workers = new Workers(WORKER)

before(async () => {
  // A long node timeout: on a busy machine a slow node must not be failed over mid-test.
  cluster = await startCluster({ masters: 3, replicasPerMaster: 1, nodeTimeoutMs: 5000 })
})

after(async () => {
  workers.killAll()
  await cluster?.stop()
})

test(`${WORKERS} processes together admit exactly the limit per key for every exact algorithm`, async (t) => {
  const config: WorkerConfig = {
    startupNodes: [...cluster.startupNodes],
    now: NOW,
    cases: CASES,
    // 24 (case, key) targets × 160 attempts each across all workers: four times the limit.
    requests: 960,
    inflight: 32,
  }
  const reports = await workers.run<WorkerConfig, WorkerReport>(WORKERS, config)
  const perWorker = reports.map((report) =>
    Object.values(report.admitted)
      .flatMap(Object.values)
      .reduce((a, b) => a + b, 0),
  )
  t.diagnostic(`admitted per worker: ${perWorker.join(', ')}`)

  for (const c of CASES) {
    const expected = c.name === 'two-policies' ? 25 : LIMIT
    for (const key of c.keys) {
      const perWorker = reports.map((report) => report.admitted[c.name][key])
      const total = perWorker.reduce((a, b) => a + b, 0)
      assert.equal(total, expected, `${c.name} ${key}: admitted ${total} (per worker ${perWorker.join('+')}), want ${expected}`)
    }
  }
})

test('the two-policy key charged its loose policy only for admitted requests', async () => {
  const client = new Cluster([...cluster.startupNodes], { scaleReads: 'master' })
  const store = new RedisStore({ client })
  try {
    const twoPolicies = CASES.find((c) => c.name === 'two-policies')!
    const policies = createPolicies(twoPolicies.policies)
    const peeks = await store.evaluate(KEYS.map((key) => ({ key, policies, cost: 0, now: NOW })))
    for (const [i, peek] of peeks.entries()) {
      // 'tight' is spent; 'loose' was charged 25 times, not once per attempt.
      assert.equal(peek.results[0].remaining, 0, `${KEYS[i]}: tight remaining`)
      assert.equal(peek.results[1].remaining, LIMIT - 25, `${KEYS[i]}: loose remaining`)
    }
  } finally {
    await store.close()
    await client.quit()
  }
})
