// `npm run bench:redis-memory`: Redis memory per active key (the `used_memory` delta on a private
// redis-server, divided by the keys) for Floodgate's records at 100k and 1M keys, side by side with
// what plain strings of the same sizes, the smallest string keys and hash-bucketed records cost: the
// floor a layout of one string per key cannot go below. Numbers only, printed as a table.
//
// Environment knobs: BENCH_MEMORY_KEYS (default "100000,1000000": the key counts measured).

import { Redis } from 'ioredis'
import { RedisStore } from '../packages/floodgate/src/redis.js'
import { ALGORITHMS, createPolicies, type AlgorithmName } from '../packages/floodgate/src/core/policy.js'
import type { EvaluateRequest } from '../packages/floodgate/src/stores/store.js'
import { policyId, policyKey } from '../packages/floodgate/src/stores/redis/keys.js'
import { startRedis } from '../packages/floodgate/test/support/redis-server.js'
import { formatBytes, formatCount, printTable, writeResults } from './support.js'

const COUNTS = (process.env.BENCH_MEMORY_KEYS ?? '100000,1000000').split(',').map(Number)
// Requests per store call and commands per pipeline while filling.
const BATCH = 1000
// Fields per hash in the bucketed reference: under hash-max-listpack-entries (128), so each hash
// stays a listpack.
const BUCKET_FIELDS = 100
const HOUR_MS = 3_600_000
// The policy id the bucketed records' fields carry: the GCRA policy's, as in its keys.
const BUCKET_POLICY_ID = policyId('gcra-100-per-1h')

/** One way of keeping `count` keys: fills an empty database and names what it filled. */
interface Layout {
  name: string
  fill(client: Redis, count: number): Promise<void>
  /** One of its keys, for MEMORY USAGE and to show the key text. */
  sampleKey(count: number): string
}

const userKey = (i: number): string => `user:${i}`

/** Floodgate's own records: one decision per user key through RedisStore, in large batches. */
function floodgate(algorithm: AlgorithmName): Layout {
  const policies = createPolicies([{ algorithm, limit: 100, period: '1h' }])
  return {
    name: `floodgate ${algorithm} (100 per 1h)`,
    async fill(client, count) {
      const store = new RedisStore({ client })
      try {
        await inParallel(count, async (from, to) => {
          const requests: EvaluateRequest[] = []
          for (let i = from; i < to; i++) requests.push({ key: userKey(i), policies, cost: 1 })
          await store.evaluate(requests)
        })
      } finally {
        await store.close()
      }
    },
    sampleKey: (count) => policyKey('fg:', userKey(count - 1), policies[0]),
  }
}

/** Plain `SET key value PXAT`: keys and values as long as Floodgate's GCRA keys and records. */
function plainStrings(name: string, keyOf: (i: number) => string, valueBytes: number, expires: boolean): Layout {
  const value = Buffer.alloc(valueBytes, 0x61)
  return {
    name,
    async fill(client, count) {
      const expiresAt = String(Date.now() + HOUR_MS)
      await inParallel(count, async (from, to) => {
        const pipeline = client.pipeline()
        for (let i = from; i < to; i++) {
          if (expires) pipeline.set(keyOf(i), value, 'PXAT', expiresAt)
          else pipeline.set(keyOf(i), value)
        }
        await pipeline.exec()
      })
    },
    sampleKey: (count) => keyOf(count - 1),
  }
}

/** Records as fields of hashes of BUCKET_FIELDS each (listpacks): one key and expiry per bucket. */
function hashBuckets(valueBytes: number): Layout {
  const value = Buffer.alloc(valueBytes, 0x61)
  const bucketOf = (i: number): string => `fg:{b${Math.floor(i / BUCKET_FIELDS)}}`
  return {
    name: `hash buckets of ${BUCKET_FIELDS} (field user:N:id, ${valueBytes} B value)`,
    async fill(client, count) {
      const expiresAt = String(Date.now() + HOUR_MS)
      await inParallel(count, async (from, to) => {
        const pipeline = client.pipeline()
        for (let i = from; i < to; i++) {
          pipeline.hset(bucketOf(i), `${userKey(i)}:${BUCKET_POLICY_ID}`, value)
          if (i % BUCKET_FIELDS === 0) pipeline.pexpireat(bucketOf(i), expiresAt)
        }
        await pipeline.exec()
      })
    },
    sampleKey: (count) => bucketOf(count - 1),
  }
}

/** Runs `work(from, to)` over [0, count) in BATCH-sized parts, 8 at a time. */
async function inParallel(count: number, work: (from: number, to: number) => Promise<void>): Promise<void> {
  let next = 0
  async function worker(): Promise<void> {
    while (next < count) {
      const from = next
      next = Math.min(count, next + BATCH)
      await work(from, next)
    }
  }
  await Promise.all(Array.from({ length: 8 }, worker))
}

async function main(): Promise<void> {
  const server = await startRedis(['--maxmemory', '0'])
  const client = new Redis(server.port, server.host)
  try {
    const info = await client.info('server')
    console.log(`Floodgate Redis memory bench: redis-server ${/redis_version:(\S+)/.exec(info)?.[1] ?? '?'} on ${server.url}`)
    // The sizes Floodgate's GCRA keys and records have, for the plain-string rows.
    const gcra = floodgate('gcra')
    await client.flushall()
    await gcra.fill(client, 1)
    const sampleKey = gcra.sampleKey(1)
    const recordBytes = (await client.getBuffer(sampleKey))?.length ?? 0
    const sameKey = (i: number): string => sampleKey.replace(userKey(0), userKey(i))
    const layouts: Layout[] = [
      gcra,
      floodgate('fixed-window'),
      plainStrings(`SET+PXAT, same key text, ${recordBytes} B value`, sameKey, recordBytes, true),
      plainStrings('SET+PXAT, key "k:N", 1 B value', (i) => `k:${i}`, 1, true),
      plainStrings('SET, key "k:N", 1 B value, no expiry', (i) => `k:${i}`, 1, false),
      hashBuckets(recordBytes),
    ]
    const perAlgorithm = await printMemoryPerAlgorithm(client)
    const rows: string[][] = []
    const perKeyFigures: { keys: number; layout: string; bytesPerKey: number }[] = []
    for (const count of COUNTS) {
      for (const layout of layouts) {
        await client.flushall()
        const before = await settledUsedMemory(client)
        const started = performance.now()
        await layout.fill(client, count)
        const seconds = (performance.now() - started) / 1000
        const delta = (await settledUsedMemory(client)) - before
        const key = layout.sampleKey(count)
        const usage = Number(await client.call('MEMORY', 'USAGE', key, 'SAMPLES', '0'))
        const perKey = `${Math.round(delta / count)} B`
        rows.push([formatCount(count), layout.name, key, `${usage} B`, `${seconds.toFixed(1)} s`, formatBytes(delta), perKey])
        perKeyFigures.push({ keys: count, layout: layout.name, bytesPerKey: delta / count })
      }
    }
    await client.flushall()
    printTable(
      ['keys', 'layout', 'a key', 'MEMORY USAGE of it', 'filled in', 'used_memory delta', 'per key'],
      rows,
      'Redis used_memory per active key (per record for hash buckets; every key expires in about an hour)',
    )
    writeResults({ memoryUsagePerKey: perAlgorithm, usedMemoryPerKey: perKeyFigures })
  } finally {
    client.disconnect()
    await server.stop()
  }
}

/** `MEMORY USAGE` of one freshly charged key per algorithm (sliding-log also when full); printed and returned. */
async function printMemoryPerAlgorithm(client: Redis): Promise<{ algorithm: string; state: string; bytes: number }[]> {
  await client.flushall()
  const rows: string[][] = []
  const figures: { algorithm: string; state: string; bytes: number }[] = []
  const store = new RedisStore({ client, prefix: 'mem:' })
  for (const algorithm of ALGORITHMS) {
    const policies = createPolicies([{ algorithm, limit: 100, period: '1h' }])
    for (const charges of algorithm === 'sliding-log' ? [1, 100] : [1]) {
      const key = `${algorithm}-${charges}`
      for (let i = 0; i < charges; i++) await store.evaluate([{ key, policies, cost: 1 }])
      const redisKey = policyKey('mem:', key, policies[0])
      const record = await client.getBuffer(redisKey)
      const bytes = Number(await client.call('MEMORY', 'USAGE', redisKey, 'SAMPLES', '0'))
      const after = charges === 1 ? '1 request' : `${charges} requests (full log)`
      rows.push([algorithm, after, redisKey, `${record?.length ?? 0} B`, `${bytes} B`])
      figures.push({ algorithm, state: after, bytes })
    }
  }
  await store.close()
  printTable(['algorithm', 'state after', 'redis key', 'record', 'MEMORY USAGE'], rows, 'One key per algorithm (limit 100 per 1h)')
  return figures
}

/** used_memory once the server has finished rehashing (two equal readings 200 ms apart, at most 5 s). */
async function settledUsedMemory(client: Redis): Promise<number> {
  let last = await usedMemory(client)
  for (let i = 0; i < 25; i++) {
    await new Promise((resolve) => setTimeout(resolve, 200))
    const now = await usedMemory(client)
    if (now === last) return now
    last = now
  }
  return last
}

async function usedMemory(client: Redis): Promise<number> {
  return Number(/used_memory:(\d+)/.exec(await client.info('memory'))?.[1])
}

main().catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
