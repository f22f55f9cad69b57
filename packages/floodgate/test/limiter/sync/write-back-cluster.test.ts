// Write-back across processes on a real 3-master Redis Cluster: four instances decide one hot key
// from their own copies, flushing every 20 ms. Together they admit no more than the documented bound
// (docs/sync.md), and the store ends holding exactly what they admitted.

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { fileURLToPath } from 'node:url'
import { Cluster } from 'ioredis'
import { createPolicies, type PolicyOptions } from '../../../src/core/policy.js'
import { RedisStore } from '../../../src/redis.js'
import { startCluster, type RedisClusterHandle } from '../../support/redis-cluster.js'
import type { WorkerConfig, WorkerReport } from './write-back-worker.js'
import { Workers } from '../../support/workers.js'

const WORKER = fileURLToPath(new URL('./write-back-worker.ts', import.meta.url))
const WORKERS = 4
const LIMIT = 1_500
const FLUSH_MS = 20

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

// A day's window and a bucket that refills once a day: one budget for the whole run, wherever the
// wall clock stands, so the only way past the limit is what the instances did not know of each other.
const HOT = { name: 'hot', period: '1d', sync: 'write-back', flushMs: FLUSH_MS } as const
const CASES: { name: string; policy: PolicyOptions }[] = [
  { name: 'fixed-window', policy: { ...HOT, algorithm: 'fixed-window', limit: LIMIT } },
  { name: 'gcra', policy: { ...HOT, algorithm: 'gcra', limit: 1, burst: LIMIT } },
]

for (const { name, policy } of CASES) {
  test(`${name}: ${WORKERS} processes on one hot key admit at most the bound, and the store counts each unit once`, async (t) => {
    const key = `hot-${name}`
    const reports = await workers.run<WorkerConfig, WorkerReport>(WORKERS, {
      startupNodes: [...cluster.startupNodes],
      key,
      policy,
      instances: WORKERS,
      // Four times the limit in demand, spread over many flush intervals.
      decisions: LIMIT,
      callers: 8,
      maxGapMs: 4,
    })
    const admitted = reports.reduce((sum, report) => sum + report.admitted, 0)
    // The bound (docs/sync.md): limit + N × cost + Σ_i (what the store took after instance i's view) / N.
    // After the run the store holds every admission, so `admitted` stands for what it took in the end.
    const unknown = reports.reduce((sum, report) => sum + Math.max(0, admitted - report.viewAtLastAdmission), 0)
    const bound = LIMIT + WORKERS * 1 + unknown / WORKERS
    const maxCallMs = Math.max(...reports.map((report) => report.maxCallMs))
    t.diagnostic(
      `admitted ${admitted} of ${LIMIT} (over ${admitted - LIMIT}); bound ${bound.toFixed(1)}; ` +
        `per worker ${reports.map((r) => r.admitted).join('+')}; ` +
        `views at last admission ${reports.map((r) => r.viewAtLastAdmission).join(', ')}; slowest store call ${maxCallMs.toFixed(1)} ms; ` +
        `instances × limit would be ${WORKERS * LIMIT}; calls ${reports.map((r) => r.stats.calls).join('+')}`,
    )
    assert.ok(admitted >= LIMIT, `demand was four times the limit: the fleet admits at least the limit, got ${admitted}`)
    assert.ok(admitted <= bound, `admitted ${admitted} > bound ${bound}`)
    assert.ok(
      reports.every((report) => report.stats.failed === 0),
      'no store call failed',
    )

    const client = new Cluster([...cluster.startupNodes], { scaleReads: 'master' })
    const store = new RedisStore({ client })
    try {
      const policies = createPolicies([policy])
      const [stored] = await store.merge([{ key, policies, units: 0 }])
      const state = stored.records[0].state!
      // The units the store holds: a window's count, or how far GCRA's arrival time is ahead, in units
      // (ticks of 1/limit ms, one period per unit; a second of refill at one unit a day rounds away).
      const held = name === 'fixed-window' ? state[1] : Math.round(((state[0] - stored.now) * 1 + state[1]) / policies[0].periodMs)
      assert.equal(held, admitted, 'the store holds every admitted unit once')
    } finally {
      await store.close()
      await client.quit()
    }
  })
}
