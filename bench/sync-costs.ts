// Redis CPU per request of each store call the sync modes make, beside an exact decision and beside
// the floor of a script that touches a key: what bounds Redis CPU per decision when a key's decisions
// per lease (or per flush) are few (docs/sync.md).
// Run under the bench lock: flock /tmp/floodgate-bench.lock node --conditions=floodgate-source --import tsx bench/sync-costs.ts
// Each kind: 2,000 existing keys, 500 requests per event-loop turn, the Redis main thread's CPU time
// (INFO cpu: the script and the socket's reads and writes) over 20,000 requests, in nine interleaved
// trials: their median, and their least (a busy machine only adds). Lease calls and decisions of one turn share a script
// call; a merge batch is one call per 500 requests (as a write-back flush sends them), and the
// `one per call` row sends each request as its own call (a key's first read).
import { Redis } from 'ioredis'
import { RedisStore } from '../packages/floodgate/src/redis.js'
import { createPolicies } from '../packages/floodgate/src/core/policy.js'
import { startRedis } from '../packages/floodgate/test/support/redis-server.js'
import { IDEMPOTENT_MERGE_FLOOR, KEY_WRITE_FLOOR, RECORD_MERGE_FLOOR } from './sync-rows.js'
import { median } from './support.js'

const server = await startRedis(['--maxmemory', '0'])
const client = new Redis({ host: server.host, port: server.port, enableAutoPipelining: true })
const admin = new Redis({ host: server.host, port: server.port })
const store = new RedisStore({ client })
const policies = createPolicies([{ algorithm: 'gcra', limit: 1e9, period: '3600s', sync: 'lease' }])
const usec = async (): Promise<number> => {
  const info = await admin.info('cpu')
  const seconds = (field: string) => Number(new RegExp(`${field}:([\\d.]+)`).exec(info)?.[1] ?? 0)
  return (seconds('used_cpu_sys_main_thread') + seconds('used_cpu_user_main_thread')) * 1e6
}

// The floors (sync-rows.ts): one script call per turn's keys that adds to each and sets its expiry,
// the least a merge must do per key (read-modify-write and keep the key alive), and one that also
// counts a resend once (one token per call); none of Floodgate's work.
function floorOf(floor: { script: string; args: () => string[] }, tag: string): (i: number) => Promise<unknown> {
  const sha = admin.script('LOAD', floor.script).then(String)
  let turn: string[] = []
  return (i) => {
    turn.push(`fg:{${tag}${i}}:floor`)
    if (turn.length < 500) return Promise.resolve()
    const keys = turn
    turn = []
    return sha.then((loaded) => client.evalsha(loaded, keys.length, ...keys, ...floor.args()))
  }
}

// As long as a write-back instance's own (`wb-` and 12 random characters).
const ORIGIN = 'wb-0123456789ab'
let id = 1
const held = new Map<number, number>()
const single: Record<string, (i: number) => Promise<unknown>> = {
  'floor (HINCRBY+PEXPIRE)': floorOf(KEY_WRITE_FLOOR, 'f'),
  'floor, idempotent (1 token)': floorOf(IDEMPOTENT_MERGE_FLOOR, 'i'),
  'floor, records (no algorithm)': floorOf(RECORD_MERGE_FLOOR, 'r'),
  'exact evaluate': (i) => store.evaluate([{ key: `e${i}`, policies, cost: 1 }]),
  'lease exact (id 0)': (i) =>
    store.lease([{ key: `x${i}`, policies, id: 0, want: 0, need: 1, leaseMs: 1000, returnId: 0, returnUnused: 0 }]),
  'lease renew (return+take)': (i) => {
    const next = id++
    const old = held.get(i) ?? 0
    held.set(i, next)
    return store.lease([{ key: `t${i}`, policies, id: next, want: 50, need: 0, leaseMs: 1000, returnId: old, returnUnused: old ? 10 : 0 }])
  },
  'merge, one per call': (i) => store.merge([{ key: `m${i}`, policies, units: 3, origin: ORIGIN, seq: id++ }]),
}
// A whole turn at once: one merge batch of 500 requests, as a flush sends its keys.
const batched: Record<string, (from: number) => Promise<unknown>> = {
  'merge batch (origin+seq)': (from) =>
    store.merge(Array.from({ length: 500 }, (_, j) => ({ key: `b${from + j}`, policies, units: 3, origin: ORIGIN, seq: id++ }))),
  'merge batch, read (0 units)': (from) =>
    store.merge(Array.from({ length: 500 }, (_, j) => ({ key: `b${from + j}`, policies, units: 0 }))),
}
const turnOf = (op: (i: number) => Promise<unknown>) => (from: number) => Promise.all(Array.from({ length: 500 }, (_, j) => op(from + j)))
const kinds: [string, (from: number) => Promise<unknown>][] = [
  ...Object.entries(single).map(([name, op]): [string, (from: number) => Promise<unknown>] => [name, turnOf(op)]),
  ...Object.entries(batched),
]
const trials = new Map<string, number[]>(kinds.map(([name]) => [name, []]))
for (const [, runTurn] of kinds) for (let i = 0; i < 2000; i += 500) await runTurn(i)
for (let trial = 0; trial < 9; trial++) {
  for (const [name, runTurn] of kinds) {
    const before = await usec()
    for (let rep = 0; rep < 10; rep++) for (let i = 0; i < 2000; i += 500) await runTurn(i)
    trials.get(name)!.push(((await usec()) - before) / 20000)
  }
}
const medianOf = (name: string) => median(trials.get(name)!)
const exact = medianOf('exact evaluate')
const bare = medianOf('floor (HINCRBY+PEXPIRE)')
console.log(
  `${'store call'.padEnd(30)} ${'µs/request'.padStart(10)} ${'least'.padStart(8)} ${'x exact'.padStart(8)} ${'x floor'.padStart(8)}`,
)
for (const [name, samples] of trials) {
  const us = median(samples)
  const least = Math.min(...samples).toFixed(2)
  const ratios = [us / exact, us / bare].map((ratio) => ratio.toFixed(2).padStart(8)).join(' ')
  console.log(`${name.padEnd(30)} ${us.toFixed(2).padStart(10)} ${least.padStart(8)} ${ratios}`)
}
client.disconnect()
admin.disconnect()
await server.stop()
