// Child process for write-back-fleet.test.ts: one write-back instance (its own Redis client and
// RedisStore) with demand of a given shape on one key, alone in its turn or together with its siblings.
//
// Protocol: serveJobs (test/support/worker-jobs.ts), a FleetConfig for each job. After its demand a
// job closes (flushing what it holds) and reports a FleetReport.

import { Redis } from 'ioredis'
import { createPolicies, type PolicyOptions } from '../../../src/core/policy.js'
import { RedisStore } from '../../../src/redis.js'
import { WriteBack, type WriteBackStats } from '../../../src/limiter/sync/write-back.js'
import { serveJobs } from '../../support/worker-jobs.js'

export interface FleetConfig {
  url: string
  key: string
  policy: PolicyOptions
  /** How many instances share the key (the share rule's N). */
  instances: number
  /**
   * One after another: each worker takes a place in line and starts once the one before it has closed
   * (its units all in the store). Otherwise all start together.
   */
  inTurn: boolean
  /** Units this worker asks for, one per decision, spread evenly over `steps` batches. */
  demand: number
  /** Batches of decisions, `stepMs` apart: the demand lasts (steps − 1) × stepMs. */
  steps: number
  stepMs: number
}

export interface FleetReport {
  admitted: number
  /** Its place in line (inTurn), from 0. */
  place: number
  stats: WriteBackStats
}

async function prepare(config: FleetConfig): Promise<() => Promise<FleetReport>> {
  const policies = createPolicies([config.policy])
  const client = new Redis(config.url)
  const store = new RedisStore({ client })
  const writeBack = new WriteBack({ store, instances: config.instances, timeoutMs: 2_000 })
  await client.ping()
  const decide = (): Promise<boolean> =>
    new Promise((resolve, reject) =>
      writeBack.decide(config.key, policies, 1, (error, response) => (error ? reject(error) : resolve(response!.allowed))),
    )
  return async () => {
    let place = 0
    if (config.inTurn) {
      place = (await client.incr(`${config.key}:line`)) - 1
      // Waits for a state (the one before has closed), not for a time.
      while (Number((await client.get(`${config.key}:turn`)) ?? 0) !== place) await sleep(2)
    }
    let admitted = 0
    let asked = 0
    for (let step = 0; step < config.steps; step++) {
      if (step > 0) await sleep(config.stepMs)
      const batch = Math.round(((step + 1) * config.demand) / config.steps) - asked
      asked += batch
      const answers = await Promise.all(Array.from({ length: batch }, decide))
      admitted += answers.filter(Boolean).length
    }
    await writeBack.close()
    if (writeBack.unsynced !== 0) throw new Error(`${writeBack.unsynced} units were not flushed`)
    if (config.inTurn) await client.incr(`${config.key}:turn`)
    await store.close()
    await client.quit()
    return { admitted, place, stats: writeBack.stats }
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

serveJobs('write-back fleet worker', prepare)
