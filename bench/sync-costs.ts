// Redis CPU per request of each store call the sync modes make, beside an exact decision: what bounds
// Redis CPU per decision when a key's decisions per lease (or per flush) are few (docs/sync.md).
// Run under the bench lock: flock /tmp/floodgate-bench.lock node --conditions=floodgate-source --import tsx bench/sync-costs.ts
// Each kind: 2,000 existing keys, batches of 500 per event-loop turn, INFO commandstats over 20,000 requests.
import { Redis } from 'ioredis'
import { RedisStore } from '../packages/floodgate/src/redis.js'
import { createPolicies } from '../packages/floodgate/src/core/policy.js'
import { startRedis } from '../packages/floodgate/test/support/redis-server.js'

const server = await startRedis(['--maxmemory', '0'])
const client = new Redis({ host: server.host, port: server.port, enableAutoPipelining: true })
const admin = new Redis({ host: server.host, port: server.port })
const store = new RedisStore({ client })
const policies = createPolicies([{ algorithm: 'gcra', limit: 1e9, period: '3600s', sync: 'lease' }])
const usec = async () => Number(/cmdstat_evalsha:calls=\d+,usec=(\d+)/.exec(await admin.info('commandstats'))?.[1] ?? 0)
let id = 1
const held = new Map<number, number>()
const kinds: Record<string, (i: number) => Promise<unknown>> = {
  'exact evaluate': (i) => store.evaluate([{ key: `e${i}`, policies, cost: 1 }]),
  'lease exact (id 0)': (i) =>
    store.lease([{ key: `x${i}`, policies, id: 0, want: 0, need: 1, leaseMs: 1000, returnId: 0, returnUnused: 0 }]),
  'lease renew (return+take)': (i) => {
    const next = id++
    const old = held.get(i) ?? 0
    held.set(i, next)
    return store.lease([{ key: `t${i}`, policies, id: next, want: 50, need: 0, leaseMs: 1000, returnId: old, returnUnused: old ? 10 : 0 }])
  },
  'merge (origin+seq)': (i) => store.merge([{ key: `m${i}`, policies, units: 3, origin: 'o', seq: id++ }]),
}
for (const [name, op] of Object.entries(kinds)) {
  for (let i = 0; i < 2000; i += 500) await Promise.all(Array.from({ length: 500 }, (_, j) => op(i + j)))
  await admin.config('RESETSTAT')
  for (let rep = 0; rep < 10; rep++) for (let i = 0; i < 2000; i += 500) await Promise.all(Array.from({ length: 500 }, (_, j) => op(i + j)))
  console.log(`${name.padEnd(28)} ${((await usec()) / 20000).toFixed(2)} µs of Redis CPU per request`)
}
client.disconnect()
admin.disconnect()
await server.stop()
