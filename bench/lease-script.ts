// `node --conditions=floodgate-source --import tsx bench/lease-script.ts` (under the bench lock):
// Redis time inside the lease script per request, from INFO commandstats (usec of EVALSHA / requests),
// for each kind of lease call the lease rows of bench:redis make, in calls of BATCH requests on
// KEYS keys, and the fixed cost of one call (no request). A diagnostic for the Redis side only: no
// client or limiter time. The policy is the lease rows' (gcra, 1,000 per hour, a burst of 10^9).
// Knobs: BENCH_BATCH (default 100), BENCH_KEYS (2,000), BENCH_REDIS_PORT (a redis-server of yours on
// 127.0.0.1, e.g. one under `valgrind --tool=callgrind`, whose instruction counts are deterministic).

import { Redis } from 'ioredis'
import { createPolicies } from '../packages/floodgate/src/core/policy.js'
import { toConnection } from '../packages/floodgate/src/stores/redis/connection.js'
import { encodeLeaseCall, ledgerKey } from '../packages/floodgate/src/stores/redis/lease-call.js'
import { policyKey } from '../packages/floodgate/src/stores/redis/keys.js'
import { leaseScript, runLeaseRunner } from '../packages/floodgate/src/stores/redis/scripts.js'
import type { LeaseRequest } from '../packages/floodgate/src/stores/store.js'
import { startRedis } from '../packages/floodgate/test/support/redis-server.js'
import { median, printTable } from './support.js'

const BATCH = Number(process.env.BENCH_BATCH ?? 100)
const KEYS = Number(process.env.BENCH_KEYS ?? 2000)
const SAMPLES = 5
const policies = createPolicies([{ algorithm: 'gcra', limit: 1_000, burst: 1e9, period: '3600s', sync: 'lease' }])

type Kind = 'take (new key)' | 'renew (return+take)' | 'give back' | 'take after give-back' | 'exact (id 0)'
const KINDS: Kind[] = ['take (new key)', 'renew (return+take)', 'give back', 'take after give-back', 'exact (id 0)']

async function main(): Promise<void> {
  const port = Number(process.env.BENCH_REDIS_PORT ?? 0)
  const server = port > 0 ? undefined : await startRedis(['--maxmemory', '0'])
  const client = new Redis(server?.port ?? port, server?.host ?? '127.0.0.1')
  const connection = toConnection(client)
  try {
    await client.script('LOAD', leaseScript().source)
    let nextId = 1
    const held: number[] = new Array(KEYS).fill(0)
    const keyOf = (i: number) => `lease:${i}`
    const requestOf = (kind: Kind, i: number): LeaseRequest => {
      const base = { key: keyOf(i), policies, leaseMs: 1000, want: 0, need: 0, id: 0, returnId: 0, returnUnused: 0 }
      if (kind === 'exact (id 0)') return { ...base, need: 1 }
      if (kind === 'give back') {
        const request = { ...base, returnId: held[i], returnUnused: 10 }
        held[i] = 0
        return request
      }
      const id = nextId++
      const request = {
        ...base,
        id,
        want: 40,
        need: kind === 'renew (return+take)' ? 0 : 1,
        returnId: held[i],
        returnUnused: held[i] ? 10 : 0,
      }
      held[i] = id
      return request
    }
    const runKind = async (kind: Kind): Promise<void> => {
      for (let from = 0; from < KEYS; from += BATCH) {
        const requests = Array.from({ length: Math.min(BATCH, KEYS - from) }, (_, j) => requestOf(kind, from + j))
        const keys = requests.flatMap((request) => [policyKey('fg:', request.key, policies[0]), ledgerKey('fg:', request.key, policies[0])])
        const { args } = encodeLeaseCall(requests, keys)
        await runLeaseRunner(connection, keys, args)
      }
    }
    const evalsha = async (): Promise<{ calls: number; usec: number }> => {
      const stats = /cmdstat_evalsha:calls=(\d+),usec=(\d+)/.exec(await client.info('commandstats'))
      return stats === null ? { calls: 0, usec: 0 } : { calls: Number(stats[1]), usec: Number(stats[2]) }
    }
    const samples = new Map<string, number[]>()
    const record = (name: string, value: number) => samples.set(name, [...(samples.get(name) ?? []), value])
    for (let sample = 0; sample <= SAMPLES; sample++) {
      await client.flushall()
      held.fill(0)
      for (const kind of KINDS) {
        await client.config('RESETSTAT')
        await runKind(kind)
        // One more renewal pass: a renewal of a key renewed before, as the rows mostly make.
        if (kind === 'renew (return+take)') {
          await client.config('RESETSTAT')
          await runKind(kind)
        }
        const { usec } = await evalsha()
        if (sample > 0) record(kind, usec / KEYS)
      }
      // The fixed cost of a call: no request at all (the runner's prologue and the script's definitions).
      await client.config('RESETSTAT')
      const { args } = encodeLeaseCall([], [])
      for (let i = 0; i < 1000; i++) await runLeaseRunner(connection, [], args)
      const empty = await evalsha()
      if (sample > 0) record('one call, no request', empty.usec / empty.calls)
    }
    printTable(
      ['lease call', 'µs per request: median (min-max)'],
      [...samples].map(([name, values]) => [
        name,
        `${median(values).toFixed(2)} (${Math.min(...values).toFixed(2)}-${Math.max(...values).toFixed(2)})`,
      ]),
      `Redis time inside the lease script (INFO commandstats), ${BATCH} requests per call on ${KEYS} keys, ` +
        `${SAMPLES} samples ('one call, no request': µs per call)`,
    )
  } finally {
    client.disconnect()
    await server?.stop()
  }
}

main().catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
