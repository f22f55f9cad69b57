// Cross-process proof of leases on a real 3-master Redis Cluster: four processes, each with its own
// client, store and RateLimiter (`sync: 'lease'`), saturate one hot key; together they admit at most the limit,
// every round, and at least 95% of it.

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { fileURLToPath } from 'node:url'
import { Cluster } from 'ioredis'
import { createPolicies, type PolicyOptions } from '../../../src/core/policy.js'
import { RedisStore } from '../../../src/redis.js'
import { startCluster, type RedisClusterHandle } from '../../support/redis-cluster.js'
import type { LeaseWorkerConfig, LeaseWorkerReport } from './lease-worker.js'
import { Workers } from '../../support/workers.js'

const WORKER = fileURLToPath(new URL('./lease-worker.ts', import.meta.url))
const WORKERS = 4
const LIMIT = 2000
const WEEK = 604_800_000

// A week's window or refill period: within one round nothing comes back by time, so "at most the
// limit" is exact and "at least 95%" measures only what leases leave unused.
const CASES: { name: string; policies: PolicyOptions[] }[] = [
  { name: 'fixed-window', policies: [{ name: 'fw', algorithm: 'fixed-window', limit: LIMIT, period: '1w', sync: 'lease' }] },
  { name: 'token-bucket', policies: [{ name: 'tb', algorithm: 'token-bucket', limit: LIMIT, period: '1w', sync: 'lease' }] },
  { name: 'gcra', policies: [{ name: 'gcra', algorithm: 'gcra', limit: LIMIT, period: '1w', sync: 'lease' }] },
  {
    name: 'two policies',
    policies: [
      { name: 'tight', algorithm: 'fixed-window', limit: LIMIT, period: '1w', sync: 'lease' },
      { name: 'loose', algorithm: 'gcra', limit: 2 * LIMIT, period: '1w', sync: 'lease' },
    ],
  },
]

let cluster: RedisClusterHandle
const workers = new Workers(WORKER)

before(async () => {
  cluster = await startCluster({ masters: 3, replicasPerMaster: 0, nodeTimeoutMs: 5000 })
})

after(async () => {
  workers.killAll()
  await cluster?.stop()
})

for (const c of CASES) {
  test(`lease, ${c.name}: ${WORKERS} processes on one hot key admit ≤ the limit and ≥ 95% of it, three rounds`, async (t) => {
    for (let round = 0; round < 3; round++) {
      const key = `hot:${c.name}:${round}`
      const window = Math.floor(Date.now() / WEEK)
      const reports = await workers.run<LeaseWorkerConfig, LeaseWorkerReport>(WORKERS, {
        startupNodes: [...cluster.startupNodes],
        key,
        policies: c.policies,
        requests: LIMIT,
        inflight: 64,
      })
      // A fixed window that ended mid-round would allow a second limit: such a round proves nothing.
      if (Math.floor(Date.now() / WEEK) !== window) continue
      const admitted = reports.reduce((sum, report) => sum + report.admitted, 0)
      const local = reports.reduce((sum, report) => sum + report.lease, 0)
      const calls = reports.reduce((sum, report) => sum + report.store, 0)
      const cached = reports.reduce((sum, report) => sum + report['deny-cache'], 0)
      t.diagnostic(
        `round ${round}: admitted ${admitted} of ${LIMIT} (${reports.map((r) => r.admitted).join('+')}); ` +
          `${local} in-process, ${calls} by a store call, ${cached} denied by the deny cache`,
      )
      assert.ok(admitted <= LIMIT, `admitted ${admitted} > ${LIMIT}`)
      assert.ok(admitted >= 0.95 * LIMIT, `admitted ${admitted} < 95% of ${LIMIT}`)
      // Every unit not admitted went back: the key has exactly what was not admitted left.
      assert.equal(await remaining(key, c.policies), LIMIT - admitted)
    }
  })
}

async function remaining(key: string, options: PolicyOptions[]): Promise<number> {
  const client = new Cluster([...cluster.startupNodes], { scaleReads: 'master' })
  const store = new RedisStore({ client })
  try {
    const policies = createPolicies(options)
    const [peek] = await store.lease([{ key, policies, id: 0, want: 0, need: 0, leaseMs: 0, returnId: 0, returnUnused: 0 }])
    return Math.min(...peek.results.map((result) => result.remaining))
  } finally {
    await store.close()
    await client.quit()
  }
}

test("exact calls on a Cluster read the ledgers of keys with live leases, many slots in one node's call", async () => {
  const client = new Cluster([...cluster.startupNodes], { scaleReads: 'master' })
  const store = new RedisStore({ client })
  try {
    const policies = createPolicies([
      { name: 'tb', algorithm: 'token-bucket', limit: 10, period: '1w', sync: 'lease' },
      { name: 'gcra', algorithm: 'gcra', limit: 10, period: '1w', sync: 'lease' },
    ])
    // Keys of many slots, each with a lease of 4 of its 10 units live for a minute.
    const keys = Array.from({ length: 24 }, (_, i) => `slots-${i}`)
    for (const single of [[policies[0]], [policies[1]], policies]) {
      const prefix = single.map((policy) => policy.name).join('+')
      const leases = await store.lease(
        keys.map((key, i) => ({
          key: `${prefix}:${key}`,
          policies: single,
          id: i + 1,
          want: 4,
          need: 1,
          leaseMs: 60_000,
          returnId: 0,
          returnUnused: 0,
        })),
      )
      assert.ok(leases.every((lease) => lease.granted === 4))
      // Twelve exact decisions of each key, all in one batch (one script call per node, across slots):
      // 6 pass per key, as the leases hold the other 4 (a plain step would pass 10 for gcra).
      const batch = keys.flatMap((key) => Array.from({ length: 12 }, () => ({ key: `${prefix}:${key}`, policies: single, cost: 1 })))
      const answers = await store.evaluate(batch)
      for (let k = 0; k < keys.length; k++) {
        const admitted = answers.slice(12 * k, 12 * k + 12).filter((answer) => answer.allowed).length
        assert.equal(admitted, 6, `${prefix}:${keys[k]}`)
      }
    }
  } finally {
    await store.close()
    await client.quit()
  }
})
