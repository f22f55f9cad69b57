// Child process for concurrency.test.ts: its own Cluster client and RedisStore hammer the same few
// keys as its sibling processes, and it reports how many requests each key admitted.
//
// Protocol: serveJobs (test/support/worker-jobs.ts), a WorkerConfig for each job, reported as
// `{"admitted": {"<case>": {"<key>": n}}}`.

import { Cluster } from 'ioredis'
import { createPolicies, type PolicyOptions } from '../../../src/core/policy.js'
import { RedisStore } from '../../../src/redis.js'
import { serveJobs } from '../../support/worker-jobs.js'

/** One policy set hammered on its own keys. */
export interface HammerCase {
  name: string
  policies: PolicyOptions[]
  keys: string[]
}

export interface WorkerConfig {
  startupNodes: { host: string; port: number }[]
  /** Every request is decided at this instant, so no window boundary or refill interferes. */
  now: number
  cases: HammerCase[]
  /** Requests this worker makes in total, spread round-robin over every (case, key). */
  requests: number
  /** Requests in flight at once. */
  inflight: number
}

export interface WorkerReport {
  admitted: Record<string, Record<string, number>>
}

async function prepare(config: WorkerConfig): Promise<() => Promise<WorkerReport>> {
  const cases = config.cases.map((c) => ({ ...c, compiled: createPolicies(c.policies) }))
  const targets = cases.flatMap((c) => c.keys.map((key) => ({ c, key })))
  const admitted: WorkerReport['admitted'] = {}
  for (const c of cases) admitted[c.name] = Object.fromEntries(c.keys.map((key) => [key, 0]))

  const client = new Cluster(config.startupNodes, { scaleReads: 'master' })
  const store = new RedisStore({ client })
  await client.ping()
  return async () => {
    let next = 0
    async function lane(): Promise<void> {
      while (next < config.requests) {
        const { c, key } = targets[next++ % targets.length]
        const [response] = await store.evaluate([{ key, policies: c.compiled, cost: 1, now: config.now }])
        if (response.allowed) admitted[c.name][key]++
      }
    }
    await Promise.all(Array.from({ length: config.inflight }, lane))
    await store.close()
    await client.quit()
    return { admitted }
  }
}

serveJobs('hammer-worker', prepare)
