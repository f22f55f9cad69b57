// Embedded-store benchmark (`npm run bench:memory`): decisions/s per algorithm through RateLimiter +
// MemoryStore (awaited `limit`, big limits, lapsed keys, and `limitSync`), side by side with
// rate-limiter-flexible's RateLimiterMemory and a bare Map counter
// (the physical limit), plus heap bytes per key. Not a test: the numbers depend on the machine.
//
// Measured as a server runs them: every contender is made once, warmed by one discarded round,
// and kept for all rounds; each request builds its key string, as a server builds it from the
// request (a fresh string whose hash the Map computes again). Each contender runs in a process of
// its own, as a server runs one limiter setup: sharing one V8 isolate, the contenders would make
// each other's call sites polymorphic, which no single server sees.
//
// Options: --ops N (decisions per measurement, default 1 000 000), --rounds R (default 5),
// --keys K (distinct keys, default 10 000), --heap-keys H (keys for the bytes-per-key figure, a
// comma-separated list, default 100000,1000000).

import { fork, spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { RateLimiterMemory } from 'rate-limiter-flexible'
import { RateLimiter, MemoryStore, createPolicies, type AlgorithmName, type PolicyOptions } from '../packages/floodgate/src/index.js'
import { createEvaluation, evaluateKeyInto, type PolicyRecord } from '../packages/floodgate/src/core/evaluate.js'
import { copyState, createStepResult } from '../packages/floodgate/src/core/algorithms/types.js'
import { ALGORITHM_BY_NAME, type State } from '../packages/floodgate/src/core/algorithms/index.js'
import { decisionLiteral, formatBytes, formatCount, interleavedRounds, printTable, ratio, writeResults, type Contender } from './support.js'

// Heap measurements need global.gc: re-run this file with --expose-gc when it is missing. Children
// run with this process's own flags (the tsx loader under `npm run`, none for compiled sources).
const gc = (globalThis as { gc?: () => void }).gc
if (gc === undefined) {
  const child = spawnSync(
    process.execPath,
    ['--expose-gc', ...process.execArgv, fileURLToPath(import.meta.url), ...process.argv.slice(2)],
    { stdio: 'inherit' },
  )
  process.exit(child.status ?? 1)
}

const { values } = parseArgs({
  options: {
    ops: { type: 'string' },
    rounds: { type: 'string' },
    keys: { type: 'string' },
    'heap-keys': { type: 'string' },
    // Internal: keep this contender in this process and measure it each time the parent asks.
    contender: { type: 'string' },
    // Internal: measure one row of the memory table in this (fresh) process and print it as JSON.
    'heap-one': { type: 'string' },
  },
})
const OPS = Number(values.ops ?? 1_000_000)
const ROUNDS = Number(values.rounds ?? 5)
const KEYS = Number(values.keys ?? 10_000)
const HEAP_KEYS = (values['heap-keys'] ?? '100000,1000000').split(',').map(Number)

// Limits high enough that every request is admitted: the benchmark measures the decision path,
// not denials (which the deny cache would answer even faster). Buckets get a modest rate and a huge
// burst, so their state lives (with a huge rate it would drain within a millisecond and every call
// would meet a fresh key). Concurrency is left out: it holds leases, not a rate. The sliding log
// keeps every timestamp, so its limit stays modest.
const ALGORITHMS: AlgorithmName[] = ['fixed-window', 'sliding-window', 'sliding-log', 'token-bucket', 'leaky-bucket', 'gcra']
const BUCKETS = new Set<AlgorithmName>(['token-bucket', 'leaky-bucket', 'gcra'])
function policyFor(algorithm: AlgorithmName): PolicyOptions {
  if (BUCKETS.has(algorithm)) return { algorithm, limit: 1_000, period: '1h', burst: 1_000_000_000 }
  return { algorithm, limit: algorithm === 'sliding-log' ? 10_000 : 1_000_000_000, period: '1h' }
}

/** Decisions per second of `op` called in a plain `await` loop over the keys. */
async function awaitLoop(op: (key: string) => Promise<unknown>): Promise<number> {
  const start = performance.now()
  for (let i = 0; i < OPS; i++) await op(`user:${i % KEYS}`)
  return (OPS * 1000) / (performance.now() - start)
}

/** Decisions per second of `op` called in a plain synchronous loop over the keys. */
function syncLoop(op: (key: string) => unknown): number {
  const start = performance.now()
  for (let i = 0; i < OPS; i++) op(`user:${i % KEYS}`)
  return (OPS * 1000) / (performance.now() - start)
}

// Big limits: GCRA and token bucket at 1e6 and 1e5 per hour (burst = limit). At 1e6 an admitted
// unit is owed back within 3.6 ms, so a key's state lapses between two visits of the key loop and
// every call meets a lapsed key (the store has dropped or will drop it); at 1e5 it stays live.
const BIG_LIMITS: [AlgorithmName, number][] = [
  ['gcra', 1e5],
  ['gcra', 1e6],
  ['token-bucket', 1e5],
  ['token-bucket', 1e6],
]
/**
 * A contender's measurement on one instance made at its first round and kept for all later ones,
 * as a server keeps its limiter: its start-up is paid once, outside the rounds that count.
 */
function longLived(make: () => () => Promise<number>): () => Promise<number> {
  let run: (() => Promise<number>) | undefined
  return () => {
    run ??= make()
    return run()
  }
}

function floodgateBig([algorithm, limit]: [AlgorithmName, number]): Contender {
  return {
    name: `floodgate ${algorithm} ${limit === 1e6 ? '1e6' : '1e5'}/h`,
    measure: longLived(() => {
      const limiter = new RateLimiter({ store: new MemoryStore({ maxKeys: KEYS * 2 }), policies: [{ algorithm, limit, period: '1h' }] })
      return () => awaitLoop((key) => limiter.limit(key))
    }),
  }
}

// Lapsed against live, on the same store clock: it reads a fixed time, or (lapsed) jumps two hours
// each time the loop has visited every key, so every visit finds the key's state expired but its
// entry still held (updated in place). Keys the store has already shed and must re-create are what
// the 1e6/h rows above meet.
function floodgateLapse(algorithm: AlgorithmName, lapsed: boolean): Contender {
  return {
    name: `floodgate ${algorithm} ${lapsed ? 'lapsed' : 'live'} keys`,
    measure: longLived(() => {
      const base = Date.now()
      let calls = 0
      const clock = lapsed ? () => base + Math.floor(calls++ / KEYS) * 7_200_000 : () => base + 0 * calls++
      const limiter = new RateLimiter({ store: new MemoryStore({ maxKeys: KEYS * 2, clock }), policies: [policyFor(algorithm)] })
      return () => awaitLoop((key) => limiter.limit(key))
    }),
  }
}

function floodgate(algorithm: AlgorithmName): Contender {
  return {
    name: `floodgate ${algorithm}`,
    measure: longLived(() => {
      const limiter = new RateLimiter({ store: new MemoryStore({ maxKeys: KEYS * 2 }), policies: [policyFor(algorithm)] })
      return () => awaitLoop((key) => limiter.limit(key))
    }),
  }
}

// The same limiter answering synchronously (`limitSync`, the MemoryStore's evaluateSync): no promise, no await.
function floodgateSync(algorithm: AlgorithmName): Contender {
  return {
    name: `floodgate ${algorithm} limitSync`,
    measure: longLived(() => {
      const limiter = new RateLimiter({ store: new MemoryStore({ maxKeys: KEYS * 2 }), policies: [policyFor(algorithm)] })
      return () => Promise.resolve(syncLoop((key) => limiter.limitSync(key)))
    }),
  }
}

// A diagnostic floor, not a product path: the shared core (evaluateKeyInto + the algorithm) alone,
// as the store calls it, records in a plain array (states copied in place, as the store keeps
// them), no Map, no clock, no Decision, no await. Everything a limiter call adds on top of it is
// the store's and the limiter's cost.
const coreOnly: Contender = {
  name: 'core only: evaluateKeyInto fixed-window (sync)',
  measure: longLived(() => {
    const policies = createPolicies([policyFor('fixed-window')])
    const records: PolicyRecord[] = Array.from({ length: KEYS }, () => ({ blockedUntil: 0, state: undefined }))
    const scratch: (PolicyRecord | undefined)[] = [undefined]
    const evaluation = createEvaluation()
    return () => {
      const now = Date.now()
      const start = performance.now()
      for (let i = 0; i < OPS; i++) {
        const record = records[i % KEYS]
        scratch[0] = record
        const next = evaluateKeyInto(scratch, now, 1, policies, evaluation).records[0]
        record.blockedUntil = next.blockedUntil
        if (next.state === undefined) continue
        if (record.state === undefined) record.state = next.state.slice()
        else copyState(record.state, next.state)
      }
      return Promise.resolve((OPS * 1000) / (performance.now() - start))
    }
  }),
}

/** The floors' work per call: count, and a new decision as complete as Floodgate's (one policy part). */
function floorDecision(entry: { count: number }, now: number) {
  entry.count++
  return decisionLiteral(entry.count, now)
}

// A diagnostic floor for any limiter with this API, not a product path: what every call of an
// honest in-process limiter cannot avoid — an async call, a Map read, one clock reading (decisions
// depend on the time) and a new decision as complete as Floodgate's (with its one policy part) —
// with no limiting logic at all.
const apiFloor: Contender = {
  name: 'floor: Map + Date.now + decision object (async)',
  measure: longLived(() => {
    const counts = new Map<string, { count: number }>()
    for (let i = 0; i < KEYS; i++) counts.set(`user:${i}`, { count: 0 })
    const hit = async (key: string) => floorDecision(counts.get(key)!, Date.now())
    return () => awaitLoop(hit)
  }),
}

// The synchronous counterpart of the floor, for limitSync: the same Map read, clock reading and
// decision object, with no async call and no await.
const syncFloor: Contender = {
  name: 'sync floor: Map + Date.now + decision object',
  measure: longLived(() => {
    const counts = new Map<string, { count: number }>()
    for (let i = 0; i < KEYS; i++) counts.set(`user:${i}`, { count: 0 })
    const hit = (key: string) => floorDecision(counts.get(key)!, Date.now())
    return () => Promise.resolve(syncLoop(hit))
  }),
}

/**
 * The bounded floor's call: what the floor does, plus the least that a limiter keeping its states
 * within a bound must add on this core. Each key indexes one typed array of states (no object per
 * key), the shared algorithm step (core/algorithms, the one TypeScript copy) runs on the state read
 * from it, and the state is written back with its expiry; the LRU upkeep is the cheapest there is (a
 * key moves to the young end only when half the store moved since it last did: here none ever
 * must). No policy sets, modes, deny cache, eviction classes or byte count. A diagnostic, not a
 * product path: it says how near the async floor any honest bounded limiter on this core can come.
 */
function boundedFloorHit(): (key: string) => ReturnType<typeof decisionLiteral> {
  const [policy] = createPolicies([policyFor('fixed-window')])
  const algorithm = ALGORITHM_BY_NAME[policy.algorithm]
  const index = new Map<string, number>()
  const words = new Float64Array(KEYS * 3)
  const movedAt = new Float64Array(KEYS)
  let moves = 0
  for (let i = 0; i < KEYS; i++) index.set(`user:${i}`, i)
  const held: State = [0, 0]
  const stepped = createStepResult()
  return (key) => {
    const at = index.get(key)!
    const now = Date.now()
    const base = at * 3
    let state: State | undefined
    if (now < words[base]) {
      held[0] = words[base + 1]
      held[1] = words[base + 2]
      state = held
    }
    const step = algorithm.step(state, now, 1, policy, stepped)
    const next = step.state
    words[base] = now + algorithm.ttlMs(next, now, policy)
    words[base + 1] = next[0]
    words[base + 2] = next[1]
    if (moves - movedAt[at] > KEYS / 2) {
      movedAt[at] = ++moves
      index.delete(key)
      index.set(key, at)
    }
    return decisionLiteral(step.remaining, now)
  }
}

const boundedFloor: Contender = {
  name: 'bounded floor: typed array + core step (async)',
  measure: longLived(() => {
    const hit = boundedFloorHit()
    return () => awaitLoop(async (key) => hit(key))
  }),
}

const boundedSyncFloor: Contender = {
  name: 'bounded sync floor: typed array + core step',
  measure: longLived(() => {
    const hit = boundedFloorHit()
    return () => Promise.resolve(syncLoop(hit))
  }),
}

const rateLimiterFlexible: Contender = {
  name: 'rate-limiter-flexible RateLimiterMemory',
  measure: longLived(() => {
    const limiter = new RateLimiterMemory({ points: 1_000_000_000, duration: 3600 })
    return () => awaitLoop((key) => limiter.consume(key))
  }),
}

// The physical limit of an in-process limiter: one Map read and write per decision, through an
// async function and an await as every limiter call is.
const bareMap: Contender = {
  name: 'bare Map counter (async)',
  measure: longLived(() => {
    const counts = new Map<string, number>()
    const hit = async (key: string): Promise<number> => {
      const count = (counts.get(key) ?? 0) + 1
      counts.set(key, count)
      return count
    }
    return () => awaitLoop(hit)
  }),
}

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
async function measureRow(name: string, count: number): Promise<number> {
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
function memoryPerKey(count: number): [string, number][] {
  return HEAP_ROWS.map((name) => {
    const child = spawnSync(
      process.execPath,
      [...process.execArgv, fileURLToPath(import.meta.url), '--heap-one', name, '--heap-keys', `${count}`],
      { encoding: 'utf8' },
    )
    if (child.status !== 0) throw new Error(`measuring ${name}: ${child.stderr}`)
    return [name, JSON.parse(child.stdout.trim().split('\n').pop()!).bytes]
  })
}

function allContenders(): Contender[] {
  return [
    ...ALGORITHMS.map(floodgate),
    ...BIG_LIMITS.map(floodgateBig),
    floodgateLapse('fixed-window', false),
    floodgateLapse('fixed-window', true),
    floodgateLapse('gcra', false),
    floodgateLapse('gcra', true),
    floodgateSync('fixed-window'),
    floodgateSync('gcra'),
    coreOnly,
    apiFloor,
    syncFloor,
    boundedFloor,
    boundedSyncFloor,
    rateLimiterFlexible,
    bareMap,
  ]
}

/** The contender named `name`, kept and measured in a child process of its own between rounds. */
function inProcess(name: string): Contender & { stop: () => void } {
  const child = fork(fileURLToPath(import.meta.url), [...process.argv.slice(2), '--contender', name], {
    execArgv: process.execArgv,
  })
  const answers: ((value: number) => void)[] = []
  child.on('message', (value) => answers.shift()?.(value as number))
  child.on('exit', (code) => {
    if (answers.length > 0) {
      console.error(`${name}: its process exited (${code}) before answering`)
      process.exit(1)
    }
  })
  return {
    name,
    measure: () =>
      new Promise<number>((resolve) => {
        answers.push(resolve)
        child.send('measure')
      }),
    stop: () => void child.disconnect(),
  }
}

async function main(): Promise<void> {
  console.log(
    `bench:memory — ${formatCount(OPS)} decisions per measurement over ${formatCount(KEYS)} keys, ` +
      `${ROUNDS} rounds (median), one process per contender, Node ${process.version}`,
  )
  const contenders = allContenders().map((contender) => inProcess(contender.name))
  // One discarded round makes every instance and warms it (JIT, its keys) before anything counts.
  for (const contender of contenders) await contender.measure()
  const results = await interleavedRounds(contenders, ROUNDS, (name, round, value) => {
    process.stdout.write(`  round ${round + 1} ${name}: ${formatCount(value)}/s\n`)
  })
  for (const contender of contenders) contender.stop()
  const rlf = results.find((r) => r.name === rateLimiterFlexible.name)!.median
  const map = results.find((r) => r.name === bareMap.name)!.median
  const floor = results.find((r) => r.name === apiFloor.name)!.median
  const syncFloorRate = results.find((r) => r.name === syncFloor.name)!.median
  const bounded = results.find((r) => r.name === boundedFloor.name)!.median
  const boundedSync = results.find((r) => r.name === boundedSyncFloor.name)!.median
  printTable(
    ['contender', 'decisions/s', 'vs rlf', 'vs bare Map', 'vs floor', 'vs sync floor', 'vs bounded', 'vs bounded sync'],
    results.map((r) => [
      r.name,
      formatCount(r.median),
      ratio(r.median, rlf),
      ratio(r.median, map),
      ratio(r.median, floor),
      ratio(r.median, syncFloorRate),
      ratio(r.median, bounded),
      ratio(r.median, boundedSync),
    ]),
    'Throughput (median; targets: limit() ≥ 0.80x the floor, limitSync ≥ 3x rate-limiter-flexible)',
  )
  const heap: [string, number][] = []
  for (const count of HEAP_KEYS) {
    const rows = memoryPerKey(count)
    printTable(
      ['store', 'bytes/key'],
      rows.map(([name, bytes]) => [name, formatBytes(bytes)]),
      `Memory per key (${formatCount(count)} keys, one policy, heap and array buffers after a full GC)`,
    )
    for (const [name, bytes] of rows) heap.push([`${name} at ${count} keys`, bytes])
  }
  writeResults({
    node: process.version,
    ops: OPS,
    rounds: ROUNDS,
    keys: KEYS,
    heapKeys: HEAP_KEYS,
    throughput: results.map(({ name, median, samples }) => ({ name, median, samples })),
    heapBytesPerKey: heap.map(([name, bytes]) => ({ name, bytes })),
  })
}

if (values.contender !== undefined) {
  const contender = allContenders().find((candidate) => candidate.name === values.contender)!
  process.on('message', async () => process.send!(await contender.measure()))
} else if (values['heap-one'] !== undefined) {
  process.stdout.write(`${JSON.stringify({ bytes: await measureRow(values['heap-one'], HEAP_KEYS[0]) })}\n`)
  process.exit(0)
} else {
  await main()
}
