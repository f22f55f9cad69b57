// Child process for write-back-cluster.test.ts: one instance (its own Cluster client, RedisStore and
// write-back copies) deciding one hot key alongside its siblings, paced so that many flushes happen.
//
// Protocol: serveJobs (test/support/worker-jobs.ts), a WorkerConfig for each job. After its run a job
// closes (flushing what it holds) and reports a WorkerReport.

import { Cluster } from 'ioredis'
import { ALGORITHM_BY_NAME } from '../../../src/core/algorithms/index.js'
import { createPolicies, type PolicyOptions } from '../../../src/core/policy.js'
import { RedisStore } from '../../../src/redis.js'
import { WriteBack, type WriteBackStats } from '../../../src/limiter/sync/write-back.js'
import { serveJobs } from '../../support/worker-jobs.js'

export interface WorkerConfig {
  startupNodes: { host: string; port: number }[]
  key: string
  policy: PolicyOptions
  /** How many instances share the key (the share rule's N). */
  instances: number
  /** Decisions this worker makes. */
  decisions: number
  /** Concurrent callers; each waits 0 to maxGapMs between its decisions. */
  callers: number
  maxGapMs: number
}

export interface WorkerReport {
  admitted: number
  /** The units the store's answer showed used when this worker last admitted (S_i in docs/sync.md). */
  viewAtLastAdmission: number
  /** The longest store call (flush or read) this worker saw, ms. */
  maxCallMs: number
  stats: WriteBackStats
}

async function prepare(config: WorkerConfig): Promise<() => Promise<WorkerReport>> {
  const policies = createPolicies([config.policy])
  const policy = policies[0]
  const capacity = ALGORITHM_BY_NAME[policy.algorithm].step(undefined, 0, 0, policy).remaining
  const client = new Cluster(config.startupNodes, { scaleReads: 'master' })
  const store = new RedisStore({ client })
  // Every store call is timed, to report the round trip the bound's staleness includes.
  let maxCallMs = 0
  const timed = {
    merge: (batch: Parameters<RedisStore['merge']>[0]) => {
      const started = performance.now()
      return store.merge(batch).finally(() => (maxCallMs = Math.max(maxCallMs, performance.now() - started)))
    },
    evaluate: store.evaluate.bind(store),
    reset: store.reset.bind(store),
    close: store.close.bind(store),
  }
  const writeBack = new WriteBack({ store: timed, instances: config.instances, timeoutMs: 2_000 })
  await client.ping()
  return async () => {
    let next = 0
    let admitted = 0
    let viewAtLastAdmission = 0
    async function caller(): Promise<void> {
      while (next++ < config.decisions) {
        const allowed = await new Promise<boolean>((resolve, reject) =>
          writeBack.decide(config.key, policies, 1, (error, response) => (error ? reject(error) : resolve(response!.allowed))),
        )
        if (allowed) {
          admitted++
          const synced = writeBack.synced(config.key, policies)?.[0].state
          viewAtLastAdmission = capacity - ALGORITHM_BY_NAME[policy.algorithm].step(synced, writeBack.now(), 0, policy).remaining
        }
        await new Promise((resolve) => setTimeout(resolve, Math.random() * config.maxGapMs))
      }
    }
    await Promise.all(Array.from({ length: config.callers }, caller))
    await writeBack.close()
    if (writeBack.unsynced !== 0) throw new Error(`${writeBack.unsynced} units were not flushed`)
    await store.close()
    await client.quit()
    return { admitted, viewAtLastAdmission, maxCallMs, stats: writeBack.stats }
  }
}

serveJobs('write-back worker', prepare)
