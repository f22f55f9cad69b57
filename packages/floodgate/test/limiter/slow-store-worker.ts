// Child process for slow-store.test.ts: a RateLimiter with every default but its store (a RedisStore
// or a MemcachedStore of its own) hammers one hot key; it reports what it admitted, and from where.
//
// Protocol: serveJobs (test/support/worker-jobs.ts), a SlowStoreConfig for each job, reported as a
// SlowStoreReport.

import { Redis } from 'ioredis'
import { createPolicies, type PolicyOptions } from '../../src/core/policy.js'
import { RateLimiter } from '../../src/index.js'
import { MemcachedStore } from '../../src/memcached.js'
import { RedisStore } from '../../src/redis.js'
import type { Store } from '../../src/stores/store.js'
import { serveJobs } from '../support/worker-jobs.js'

export interface SlowStoreConfig {
  kind: 'redis' | 'memcached'
  host: string
  port: number
  key: string
  policies: PolicyOptions[]
  /** Decisions this worker asks for. */
  requests: number
  /** Decisions in flight at once. */
  inflight: number
}

export interface SlowStoreReport {
  admitted: number
  /** Decisions by source (store, fallback-open...), admitted or not. */
  sources: Record<string, number>
  /** The longest a decision took (ms), for the diagnostics only. */
  slowestMs: number
}

async function prepare(config: SlowStoreConfig): Promise<() => Promise<SlowStoreReport>> {
  let store: Store
  let redis: Redis | undefined
  if (config.kind === 'redis') {
    redis = new Redis(config.port, config.host)
    store = new RedisStore({ client: redis })
  } else {
    store = new MemcachedStore({ servers: [`${config.host}:${config.port}`] })
  }
  // Connected (and the script loaded) before the start line, by the store itself: the limiter's
  // timeout starts as a fresh process's does, with nothing yet known of the store's latency.
  const warm = createPolicies([{ name: 'warm', algorithm: 'fixed-window', limit: 1_000_000, period: '1h' }])
  await store.evaluate([{ key: `warm:${process.pid}`, policies: warm, cost: 1 }])
  // Every limiter option at its default but the store and the policy.
  const limiter = new RateLimiter({ store, policies: config.policies })
  return async () => {
    const report: SlowStoreReport = { admitted: 0, sources: {}, slowestMs: 0 }
    let started = 0
    async function lane(): Promise<void> {
      while (started < config.requests) {
        started++
        const at = performance.now()
        const decision = await limiter.limit(config.key)
        report.slowestMs = Math.max(report.slowestMs, Math.round(performance.now() - at))
        report.sources[decision.source] = (report.sources[decision.source] ?? 0) + 1
        if (decision.allowed) report.admitted++
      }
    }
    await Promise.all(Array.from({ length: config.inflight }, lane))
    await limiter.close()
    await store.close()
    redis?.disconnect()
    return report
  }
}

serveJobs('slow-store-worker', prepare)
