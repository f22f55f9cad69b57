// Instructions per embedded decision, by part (`bench/memory-callgrind.ts [--algorithm A] [--base DIR]`):
// each row's loop runs under `valgrind --tool=callgrind` twice, after the same warm-up, with OPS and
// 3 × OPS calls; the difference of the two totals over 2 × OPS is the row's steady-state cost per
// call (start-up, loading and the warm-up's compilation cancel out), the lower of two such pairs.
// Instruction counts hold still where timings on a shared machine swing by a third; they do not see
// cache misses. Rows: the async and sync floors (bench:memory's), the store alone (evaluateSync),
// limitSync(), limit(), and limit() on denied keys (decided by the store, or by the deny cache);
// their differences are the store's share, the limiter layer's and the promise's. Keys are built
// per request, 10,000 of them. `--base DIR` counts DIR's checkout too. Needs valgrind. Not a test.

import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { floorDecision } from './support.js'

const { values } = parseArgs({
  options: {
    algorithm: { type: 'string' },
    base: { type: 'string' },
    ops: { type: 'string' },
    rows: { type: 'string' },
    // Internal: run one row's loop in this process (under valgrind).
    row: { type: 'string' },
    root: { type: 'string' },
    calls: { type: 'string' },
  },
})
const OPS = Number(values.ops ?? 100_000)
const WARM = 300_000
const KEYS = 10_000
const ROWS = ['async floor', 'sync floor', 'store alone', 'limitSync', 'limit', 'limit denied', 'deny cache']
const SELF = fileURLToPath(import.meta.url)
const ROOT = join(import.meta.dirname, '..')

type Side = typeof import('../packages/floodgate/src/index.js')

function policyFor(algorithm: string) {
  return algorithm.endsWith('bucket') || algorithm === 'gcra'
    ? { algorithm, limit: 1_000, period: '1h', burst: 1e9 }
    : { algorithm, limit: 1e9, period: '1h' }
}

// One row's call, made once per process.
function callOf(side: Side, row: string, algorithm: string): (key: string) => unknown {
  if (row === 'async floor' || row === 'sync floor') {
    const counts = new Map<string, { count: number }>()
    for (let i = 0; i < KEYS; i++) counts.set(`user:${i}`, { count: 0 })
    return row === 'sync floor'
      ? (key) => floorDecision(counts.get(key)!, Date.now())
      : async (key) => floorDecision(counts.get(key)!, Date.now())
  }
  // Denied keys: every key at its limit (one unit an hour), so each call is a denial, decided by the
  // store ('limit denied', the deny cache off) or answered by the deny cache ('deny cache').
  const denied = row === 'limit denied' || row === 'deny cache'
  const store = new side.MemoryStore({ maxKeys: KEYS * 2 })
  const policies = [denied ? { algorithm, limit: 1, period: '1h' } : policyFor(algorithm)]
  const options = row === 'limit denied' ? { store, policies, denyCache: false as const } : { store, policies }
  const limiter = new side.RateLimiter(options as ConstructorParameters<Side['RateLimiter']>[0])
  if (row === 'store alone') {
    const own = limiter.policies
    return (key) => store.evaluateSync({ key, policies: own, cost: 1 })
  }
  if (row === 'limitSync') return (key) => limiter.limitSync(key)
  return (key) => limiter.limit(key)
}

async function loop(call: (key: string) => unknown, calls: number): Promise<void> {
  for (let i = 0; i < calls; i++) {
    const answer = call(`user:${i % KEYS}`)
    if (answer instanceof Promise) await answer
  }
}

if (values.row !== undefined) {
  const side: Side = await import(pathToFileURL(join(values.root!, 'packages/floodgate/src/index.ts')).href)
  const call = callOf(side, values.row, values.algorithm ?? 'fixed-window')
  await loop(call, WARM)
  // Both runs of a row start their measured calls from the same heap.
  ;(globalThis as { gc?: () => void }).gc?.()
  await loop(call, Number(values.calls))
} else {
  const algorithm = values.algorithm ?? 'fixed-window'
  const rows = values.rows === undefined ? ROWS : values.rows.split(',')
  const roots = values.base === undefined ? [ROOT] : [ROOT, values.base]
  // Instructions of one run of `row` with `calls` measured calls after the warm-up.
  const total = (root: string, row: string, calls: number): number => {
    const run = spawnSync(
      'valgrind',
      [
        '--tool=callgrind',
        '--callgrind-out-file=/dev/null',
        process.execPath,
        // One thread (no concurrent compiler or collector, whose timing varies) and gc() after the warm-up.
        '--single-threaded',
        '--expose-gc',
        ...process.execArgv,
        SELF,
        '--row',
        row,
        '--root',
        root,
        '--algorithm',
        algorithm,
        '--calls',
        String(calls),
      ],
      { encoding: 'utf8' },
    )
    const collected = /Collected : (\d+)/.exec(run.stderr)
    if (run.status !== 0 || collected === null) throw new Error(`${row}: valgrind failed\n${run.stderr.slice(-2000)}`)
    return Number(collected[1])
  }
  console.log(
    `instructions per call, ${algorithm}, ${KEYS} keys built per request, (I(3N) - I(N)) / 2N, N = ${OPS}, ` +
      'the lower of two pairs of runs (a one-time event, a late compilation or a full collection, lands in one run)',
  )
  const perCall = (root: string, row: string) => (total(root, row, 3 * OPS) - total(root, row, OPS)) / (2 * OPS)
  for (const row of rows) {
    const figures = roots.map((root) => {
      const pair = [perCall(root, row), perCall(root, row)]
      return `${Math.min(...pair).toFixed(0)} (${pair.map((n) => n.toFixed(0)).join(', ')})`
    })
    console.log(`${row.padEnd(14)} ${figures.map((text, i) => `${i === 0 ? 'this' : 'base'} ${text}`).join('  ')}`)
  }
}
