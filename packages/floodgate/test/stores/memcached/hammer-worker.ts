// Child process for concurrency.test.ts: its own memjs client and MemcachedStore hammer the same few
// keys as its sibling processes; it reports what each key admitted and how many CAS writes were retried.
//
// Protocol: serveJobs (test/support/worker-jobs.ts), a WorkerConfig for each job, reported as a
// WorkerReport.

import { createPolicies, type PolicyOptions } from '../../../src/core/policy.js'
import { MemcachedStore } from '../../../src/memcached.js'
import { serveJobs } from '../../support/worker-jobs.js'

/** One policy set hammered on its own keys. */
export interface HammerCase {
  name: string
  policies: PolicyOptions[]
  keys: string[]
}

export interface WorkerConfig {
  servers: string[]
  /** Every request is decided at this instant, so no window boundary or refill interferes. */
  now: number
  cases: HammerCase[]
  /** Requests per (case, key) this worker makes. */
  requestsPerKey: number
  /** Requests in flight at once. */
  inflight: number
  casRetries: number
}

export interface WorkerReport {
  admitted: Record<string, Record<string, number>>
  /** Decisions refused (CAS retries exhausted), per case. */
  refused: Record<string, number>
  /** CAS writes retried over the whole run, per case. */
  retries: Record<string, number>
  /** The first few refusals' messages. */
  errors: string[]
}

async function prepare(config: WorkerConfig): Promise<() => Promise<WorkerReport>> {
  const report: WorkerReport = { admitted: {}, refused: {}, retries: {}, errors: [] }
  const store = new MemcachedStore({ servers: config.servers, casRetries: config.casRetries, memjs: { timeout: 10 } })
  // Connect to every server before the start line: one request per case and key, at another instant (another window).
  for (const c of config.cases) {
    await store.evaluate(c.keys.map((key) => ({ key: `warm:${key}`, policies: createPolicies(c.policies), cost: 0, now: 0 })))
  }
  return async () => {
    // One case at a time across all workers' lanes, so each case's retries are its own.
    for (const c of config.cases) {
      const policies = createPolicies(c.policies)
      const admitted: Record<string, number> = Object.fromEntries(c.keys.map((key) => [key, 0]))
      let refused = 0
      const retriesBefore = store.casStats.retries
      const total = config.requestsPerKey * c.keys.length
      let next = 0
      async function lane(): Promise<void> {
        while (next < total) {
          const key = c.keys[next++ % c.keys.length]
          try {
            const [response] = await store.evaluate([{ key, policies, cost: 1, now: config.now }])
            if (response.allowed) admitted[key]++
          } catch (error) {
            refused++
            if (report.errors.length < 3) report.errors.push(`${c.name}: ${String(error)}`)
          }
        }
      }
      await Promise.all(Array.from({ length: config.inflight }, lane))
      report.admitted[c.name] = admitted
      report.refused[c.name] = refused
      report.retries[c.name] = store.casStats.retries - retriesBefore
    }
    await store.close()
    return report
  }
}

serveJobs('hammer-worker', prepare)
