// A/B of the limiter layer in ONE process (`bench/memory-ab.ts --base DIR [--algorithm A | --five] [--sync] [--denied [--no-deny-cache]]`):
// this checkout's RateLimiter + MemoryStore and another checkout's (DIR, with its own node_modules)
// are loaded side by side (two module graphs: each keeps its own JIT feedback) and measured in
// alternating rounds, so both sides meet the same load on a shared machine; the figure is the
// median of the paired ratios (this / base), which holds still where process-per-contender runs
// swing by a third. Keys built per request; `--five`: the five limiters of different algorithms
// of each side alive at once, keys prebuilt, as bench:memory's five-in-one group. `--denied`: every
// key over its limit. Not a test.

import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { pathToFileURL } from 'node:url'

const { values } = parseArgs({
  options: {
    base: { type: 'string' },
    algorithm: { type: 'string' },
    five: { type: 'boolean' },
    sync: { type: 'boolean' },
    // Every key denied (one unit an hour, spent in the warm-up): answered by the deny cache, or with
    // --no-deny-cache by the store.
    denied: { type: 'boolean' },
    'no-deny-cache': { type: 'boolean' },
    ops: { type: 'string' },
  },
})
if (values.base === undefined) throw new Error('give --base DIR: a checkout of the revision to compare with')
const ROOTS = [join(import.meta.dirname, '..'), values.base]
const FIVE = ['fixed-window', 'sliding-window', 'token-bucket', 'leaky-bucket', 'gcra']
const OPS = Number(values.ops ?? 500_000)
const ROUNDS = 9
const KEYS = 10_000

type Limiter = { limit(key: string): Promise<unknown>; limitSync(key: string): unknown }
const sides = await Promise.all(ROOTS.map((root) => import(pathToFileURL(join(root, 'packages/floodgate/src/index.ts')).href)))
const policyFor = (algorithm: string) => {
  if (values.denied) return { algorithm, limit: 1, period: '1h' }
  return algorithm.endsWith('bucket') ? { algorithm, limit: 1_000, period: '1h', burst: 1e9 } : { algorithm, limit: 1e9, period: '1h' }
}
const prebuilt = Array.from({ length: KEYS }, (_, i) => `user:${i}`)

async function round(limiter: Limiter): Promise<number> {
  const start = performance.now()
  if (values.sync) {
    if (values.five) for (let i = 0; i < OPS; i++) limiter.limitSync(prebuilt[i % KEYS])
    else for (let i = 0; i < OPS; i++) limiter.limitSync(`user:${i % KEYS}`)
  } else if (values.five) for (let i = 0; i < OPS; i++) await limiter.limit(prebuilt[i % KEYS])
  else for (let i = 0; i < OPS; i++) await limiter.limit(`user:${i % KEYS}`)
  return OPS / ((performance.now() - start) / 1000)
}

const DENIED = values.denied ? (values['no-deny-cache'] ? ' denied (store)' : ' denied (deny cache)') : ''
const median = (v: number[]) => v.slice().sort((a, b) => a - b)[v.length >> 1]

async function compare(pairs: [Limiter, Limiter][], names: string[]): Promise<void> {
  for (const pair of pairs) for (const limiter of pair) await round(limiter)
  const rates = pairs.map(() => [[] as number[], [] as number[]])
  for (let r = 0; r < ROUNDS; r++) {
    for (let i = 0; i < pairs.length; i++) {
      // Which side goes first alternates, so neither always follows the other's garbage.
      const order = r % 2 === 0 ? [0, 1] : [1, 0]
      for (const side of order) rates[i][side].push(await round(pairs[i][side]))
    }
  }
  for (let i = 0; i < pairs.length; i++) {
    const [own, base] = rates[i]
    const ratios = own.map((rate, r) => rate / base[r])
    console.log(
      `${names[i]} ${values.sync ? 'limitSync' : 'limit'}${DENIED}: this ${Math.round(median(own)).toLocaleString('en')}/s, base ` +
        `${Math.round(median(base)).toLocaleString('en')}/s, paired ratio ${median(ratios).toFixed(3)} ` +
        `[${ratios.map((ratio) => ratio.toFixed(2)).join(' ')}]`,
    )
  }
}

const make = (side: (typeof sides)[number], algorithm: string): Limiter =>
  new side.RateLimiter({
    store: new side.MemoryStore({ maxKeys: KEYS * 2 }),
    policies: [policyFor(algorithm)],
    ...(values['no-deny-cache'] ? { denyCache: false } : {}),
  })
if (values.five) {
  // All ten alive before any is measured, as in bench:memory's five-in-one group.
  const limiters = sides.map((side) => FIVE.map((algorithm) => make(side, algorithm)))
  await compare(
    FIVE.map((_, i) => [limiters[0][i], limiters[1][i]]),
    FIVE.map((algorithm) => `5-in-1 ${algorithm}`),
  )
} else {
  // One limiter per side, as a process of one limiter (run once per algorithm: later ones would share
  // the call sites of earlier ones).
  const algorithm = values.algorithm ?? 'fixed-window'
  await compare([[make(sides[0], algorithm), make(sides[1], algorithm)]], [algorithm])
}
