// Child process for auto-redis.test.ts: its own client, RedisStore and RateLimiter (`sync: 'auto'`)
// on a private redis-server, asking one key as fast as it can (so on leases) or paced (so cold, on
// the plain exact path); it reports what it admitted and by which path.
//
// Protocol: serveJobs (test/support/worker-jobs.ts), an AutoWorkerConfig for each job. After its
// run a job gives its leases back (close) and reports an AutoWorkerReport.

import { Redis } from 'ioredis'
import type { PolicyOptions } from '../../../src/core/policy.js'
import { RateLimiter } from '../../../src/index.js'
import { RedisStore } from '../../../src/redis.js'
import { serveJobs } from '../../support/worker-jobs.js'

export interface AutoWorkerConfig {
  host: string
  port: number
  key: string
  policies: PolicyOptions[]
  /** Decisions this worker asks for in all. */
  requests: number
  /** Decisions in flight at once. */
  inflight: number
  /** Pause between one lane's decisions (ms; 0: none), to keep the key cold on this process. */
  pauseMs: number
}

export interface AutoWorkerReport {
  admitted: number
  /** Decisions by source: in-process from a lease, by a store call, and denials the deny cache answered. */
  lease: number
  store: number
  'deny-cache': number
}

async function prepare(config: AutoWorkerConfig): Promise<() => Promise<AutoWorkerReport>> {
  const client = new Redis({ host: config.host, port: config.port })
  const store = new RedisStore({ client })
  // A generous timeout: a busy machine must not turn a slow store call into the failure mode.
  const limiter = new RateLimiter({ store, policies: config.policies, timeout: '30s', onStoreError: 'closed' })
  await client.ping()
  return async () => {
    const report: AutoWorkerReport = { admitted: 0, lease: 0, store: 0, 'deny-cache': 0 }
    let next = 0
    async function lane(): Promise<void> {
      while (next++ < config.requests) {
        const decision = await limiter.limit(config.key)
        if (decision.allowed) report.admitted++
        if (decision.source !== 'lease' && decision.source !== 'store' && decision.source !== 'deny-cache') {
          throw new Error(`decided by ${decision.source}: the store failed`)
        }
        report[decision.source]++
        if (config.pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, config.pauseMs))
      }
    }
    await Promise.all(Array.from({ length: config.inflight }, lane))
    await limiter.close()
    await store.close()
    await client.quit()
    return report
  }
}

serveJobs('auto-worker', prepare)
