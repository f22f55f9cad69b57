// `npx tsx bench/redis-script.ts`: Redis time per decision inside the runner script, per algorithm,
// from INFO commandstats (usec of EVALSHA / decisions) for calls of BATCH requests on distinct keys:
// keys new to every call, and the same keys call after call (records read, updated, rewritten).
// A diagnostic for the Redis-side cost only: no client, network or limiter time, and far less
// noisy than throughput on a busy machine. Each sample starts from an empty database. Knobs:
// BENCH_BATCH (default 256), BENCH_CALLS (100).

import { Redis } from 'ioredis'
import { encodeCall, type CallRequest } from '../packages/floodgate/src/stores/redis/batch-codec.js'
import { policyKey } from '../packages/floodgate/src/stores/redis/keys.js'
import { runRunner, runnerScript } from '../packages/floodgate/src/stores/redis/scripts.js'
import { toConnection } from '../packages/floodgate/src/stores/redis/connection.js'
import { ALGORITHMS, createPolicies } from '../packages/floodgate/src/core/policy.js'
import { startRedis } from '../packages/floodgate/test/support/redis-server.js'
import { median, printTable } from './support.js'

const BATCH = Number(process.env.BENCH_BATCH ?? 256)
const CALLS = Number(process.env.BENCH_CALLS ?? 100)
const SAMPLES = 5
// Admits every request, as bench/redis.ts does.
const LIMIT = 1_000_000_000

async function main(): Promise<void> {
  const server = await startRedis()
  const client = new Redis(server.port, server.host)
  try {
    const { source } = runnerScript()
    await client.script('LOAD', source)
    const rows: string[][] = []
    for (const algorithm of ALGORITHMS) {
      const fresh = await microsPerDecision(client, (call) => callFor(algorithm, `${algorithm}-${call}`))
      // A log or a lease set grows with every admitted request, so "the same keys again" would
      // measure ever longer states rather than the call.
      const growing = algorithm === 'sliding-log' || algorithm === 'concurrency'
      const same = growing ? undefined : await microsPerDecision(client, () => callFor(algorithm, algorithm))
      rows.push([algorithm, summary(fresh), same === undefined ? '-' : summary(same)])
    }
    printTable(
      ['algorithm', 'new keys: median µs (min-max)', 'same keys again: median µs (min-max)'],
      rows,
      `Redis time inside the runner script per decision (${BATCH} requests per call, ` +
        `${SAMPLES} samples of ${CALLS - 1} calls after one untimed; limit ${LIMIT} per 1h)`,
    )
  } finally {
    client.disconnect()
    await server.stop()
  }
}

interface EncodedCall {
  keys: string[]
  args: string[]
}

/** One batch: BATCH requests of one policy on keys `<prefix>:0…`, as the store would encode it. */
function callFor(algorithm: (typeof ALGORITHMS)[number], prefix: string): EncodedCall {
  const policies = createPolicies([{ algorithm, limit: LIMIT, period: '1h' }])
  const requests: CallRequest[] = Array.from({ length: BATCH }, (_, i) => ({
    request: { key: `${prefix}:${i}`, policies, cost: 1 },
    keys: [policyKey('bench:', `${prefix}:${i}`, policies[0])],
    slot: -1,
  }))
  return encodeCall(requests, requests.length)
}

/** SAMPLES measurements of EVALSHA time per decision over CALLS calls each, after a warm-up. */
async function microsPerDecision(client: Redis, callNumbered: (call: number) => EncodedCall): Promise<number[]> {
  // Encoded ahead, so each sample spends its time in Redis, not in encoding.
  const calls = Array.from({ length: CALLS * (SAMPLES + 1) }, (_, i) => callNumbered(i))
  const connection = toConnection(client)
  const run = ({ keys, args }: EncodedCall) => runRunner(connection, keys, args)
  for (let i = 0; i < CALLS; i++) await run(calls[i])
  const samples: number[] = []
  for (let sample = 1; sample <= SAMPLES; sample++) {
    // Each sample from an empty database (one untimed call first, so "same keys" find their
    // records): keys piling up over the samples (rehashing, expiry cycles) made them drift.
    await client.flushall()
    await run(calls[sample * CALLS])
    await client.config('RESETSTAT')
    for (let i = 1; i < CALLS; i++) await run(calls[sample * CALLS + i])
    const stats = /cmdstat_evalsha:calls=(\d+),usec=(\d+)/.exec(await client.info('commandstats'))
    if (stats === null) throw new Error('no EVALSHA in INFO commandstats')
    samples.push(Number(stats[2]) / Number(stats[1]) / BATCH)
  }
  return samples
}

function summary(samples: number[]): string {
  return `${median(samples).toFixed(2)} (${Math.min(...samples).toFixed(2)}-${Math.max(...samples).toFixed(2)})`
}

main().catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
