// Child process for lease-cluster.test.ts: its own Cluster client, RedisStore and RateLimiter (with
// `sync: 'lease'` policies) hammer one hot key as its sibling processes do; it reports what it admitted.
//
// Protocol: serveJobs (test/support/worker-jobs.ts), a LeaseWorkerConfig for each job. After its
// run a job gives its leases back and reports `{"admitted": n, "lease": n, "store": n, ...}`.

import { Cluster } from 'ioredis'
import type { PolicyOptions } from '../../../src/core/policy.js'
import { RateLimiter } from '../../../src/index.js'
import { RedisStore } from '../../../src/redis.js'
import { serveJobs } from '../../support/worker-jobs.js'

export interface LeaseWorkerConfig {
  startupNodes: { host: string; port: number }[]
  key: string
  policies: PolicyOptions[]
  /** Decisions this worker asks for in all. */
  requests: number
  /** Decisions in flight at once. */
  inflight: number
}

export interface LeaseWorkerReport {
  admitted: number
  /** Decisions by source: in-process from a lease, by a store call, and denials the deny cache answered. */
  lease: number
  store: number
  'deny-cache': number
}

async function prepare(config: LeaseWorkerConfig): Promise<() => Promise<LeaseWorkerReport>> {
  const client = new Cluster(config.startupNodes, { scaleReads: 'master' })
  const store = new RedisStore({ client })
  // A generous timeout: a busy machine must not turn a slow store call into the failure mode.
  const limiter = new RateLimiter({ store, policies: config.policies, timeout: '30s', onStoreError: 'closed' })
  await client.ping()
  return async () => {
    const report: LeaseWorkerReport = { admitted: 0, lease: 0, store: 0, 'deny-cache': 0 }
    let next = 0
    async function lane(): Promise<void> {
      while (next++ < config.requests) {
        const decision = await limiter.limit(config.key)
        if (decision.allowed) report.admitted++
        if (decision.source !== 'lease' && decision.source !== 'store' && decision.source !== 'deny-cache') {
          throw new Error(`decided by ${decision.source}: the store failed`)
        }
        report[decision.source]++
      }
    }
    await Promise.all(Array.from({ length: config.inflight }, lane))
    await limiter.close()
    await store.close()
    await client.quit()
    return report
  }
}

serveJobs('lease-worker', prepare)
