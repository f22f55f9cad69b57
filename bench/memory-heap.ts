// bench:memory's bytes per key: each row measured in a fresh process, between full collections.

import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { RateLimiterMemory } from 'rate-limiter-flexible'
import { MemoryStore, createPolicies, type AlgorithmName } from '../packages/floodgate/src/index.js'
import { ALGORITHMS } from './memory-options.js'

// The entry point the rows run in (bench/memory.ts, with --heap-one).
const ENTRY = fileURLToPath(new URL('./memory.ts', import.meta.url))
const gc = (globalThis as { gc?: () => void }).gc

// What the process holds: the JS heap and the memory behind typed arrays (the store's slab is one).
function used(): number {
  const { heapUsed, arrayBuffers } = process.memoryUsage()
  return heapUsed + arrayBuffers
}

/** Bytes per key (heap and array buffers) after `fill` creates `count` keys, measured between full collections. */
async function bytesPerKey(count: number, fill: (key: string) => unknown): Promise<number> {
  const held: unknown[] = []
  await settle()
  const before = used()
  for (let i = 0; i < count; i++) held.push(await fill(`bytes:${i}`))
  held.length = 0
  await settle()
  return (used() - before) / count
}

// Full collections, and a pause between them for the buffers of collected typed arrays (the
// store's slab as it grew) to be released: that happens after the collection, not in it.
async function settle(): Promise<void> {
  for (let i = 0; i < 3; i++) {
    gc!()
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

const HEAP_ROWS = [
  ...ALGORITHMS.map((algorithm) => `floodgate ${algorithm}`),
  'rate-limiter-flexible RateLimiterMemory',
  'bare Map counter',
]

/** One row of the memory table, measured in this process (see memoryPerKey). */
export async function measureRow(name: string, count: number): Promise<number> {
  if (name === 'bare Map counter') {
    const counts = new Map<string, number>()
    return bytesPerKey(count, (key) => void counts.set(key, 1))
  }
  if (name === 'rate-limiter-flexible RateLimiterMemory') {
    const rlf = new RateLimiterMemory({ points: 1_000, duration: 3600 })
    return bytesPerKey(count, (key) => rlf.consume(key).then(() => undefined))
  }
  const algorithm = name.replace('floodgate ', '') as AlgorithmName
  const store = new MemoryStore({ maxKeys: count * 2, maxBytes: count * 1024 })
  const policies = createPolicies([{ algorithm, limit: 1_000, period: '1h' }])
  // One time for the whole fill, so that no key lapses (and is shed) while the store fills.
  const now = Date.now()
  const bytes = await bytesPerKey(count, (key) => store.evaluateOne(key, policies, 1, now) && undefined)
  if (store.size !== count) throw new Error(`the store holds ${store.size} keys of ${count}`)
  return bytes
}

// Each row in a process of its own: memory freed by an earlier row (a typed array's buffer is
// released some time after its collection) would otherwise come off a later row's figure.
export function memoryPerKey(count: number): [string, number][] {
  return HEAP_ROWS.map((name) => {
    const child = spawnSync(process.execPath, [...process.execArgv, ENTRY, '--heap-one', name, '--heap-keys', `${count}`], {
      encoding: 'utf8',
    })
    if (child.status !== 0) throw new Error(`measuring ${name}: ${child.stderr}`)
    return [name, JSON.parse(child.stdout.trim().split('\n').pop()!).bytes]
  })
}
