// bench:memory's options and the loops every contender runs (see bench/memory.ts).

import { parseArgs } from 'node:util'
import type { AlgorithmName, PolicyOptions } from '../packages/floodgate/src/index.js'

export const { values } = parseArgs({
  options: {
    ops: { type: 'string' },
    rounds: { type: 'string' },
    keys: { type: 'string' },
    'heap-keys': { type: 'string' },
    // A checkout of another revision with this bench copied into its bench/: its limiters are measured
    // too, side by side in the same run (rows named `base …`).
    base: { type: 'string' },
    // Only the five-in-one group (and the base's), no own-process rows and no memory table: a quick A/B.
    'five-only': { type: 'boolean' },
    // Internal: keep this contender in this process and measure it each time the parent asks.
    contender: { type: 'string' },
    // Internal: keep this group of contenders (one process, several limiters) and measure the one the parent names.
    group: { type: 'string' },
    // Internal: measure one row of the memory table in this (fresh) process and print it as JSON.
    'heap-one': { type: 'string' },
  },
})
export const OPS = Number(values.ops ?? 1_000_000)
export const ROUNDS = Number(values.rounds ?? 5)
export const KEYS = Number(values.keys ?? 10_000)
export const HEAP_KEYS = (values['heap-keys'] ?? '100000,1000000').split(',').map(Number)

// Limits high enough that every request is admitted: the benchmark measures the decision path,
// not denials (which the deny cache would answer even faster). Buckets get a modest rate and a huge
// burst, so their state lives (with a huge rate it would drain within a millisecond and every call
// would meet a fresh key). Concurrency is left out: it holds leases, not a rate. The sliding log
// keeps every timestamp, so its limit stays modest.
export const ALGORITHMS: AlgorithmName[] = ['fixed-window', 'sliding-window', 'sliding-log', 'token-bucket', 'leaky-bucket', 'gcra']
const BUCKETS = new Set<AlgorithmName>(['token-bucket', 'leaky-bucket', 'gcra'])
export function policyFor(algorithm: AlgorithmName): PolicyOptions {
  if (BUCKETS.has(algorithm)) return { algorithm, limit: 1_000, period: '1h', burst: 1_000_000_000 }
  return { algorithm, limit: algorithm === 'sliding-log' ? 10_000 : 1_000_000_000, period: '1h' }
}

/** Decisions per second of `op` called in a plain `await` loop over the keys. */
export async function awaitLoop(op: (key: string) => Promise<unknown>): Promise<number> {
  const start = performance.now()
  for (let i = 0; i < OPS; i++) await op(`user:${i % KEYS}`)
  return (OPS * 1000) / (performance.now() - start)
}

/** Decisions per second of `op` called in a plain synchronous loop over the keys. */
export function syncLoop(op: (key: string) => unknown): number {
  const start = performance.now()
  for (let i = 0; i < OPS; i++) op(`user:${i % KEYS}`)
  return (OPS * 1000) / (performance.now() - start)
}

// Big limits: GCRA and token bucket at 1e6 and 1e5 per hour (burst = limit). At 1e6 an admitted
// unit is owed back within 3.6 ms, so a key's state lapses between two visits of the key loop and
// every call meets a lapsed key (the store has dropped or will drop it); at 1e5 it stays live.
export const BIG_LIMITS: [AlgorithmName, number][] = [
  ['gcra', 1e5],
  ['gcra', 1e6],
  ['token-bucket', 1e5],
  ['token-bucket', 1e6],
]
/**
 * A contender's measurement on one instance made at its first round and kept for all later ones,
 * as a server keeps its limiter: its start-up is paid once, outside the rounds that count.
 */
export function longLived(make: () => () => Promise<number>): () => Promise<number> {
  let run: (() => Promise<number>) | undefined
  return () => {
    run ??= make()
    return run()
  }
}
