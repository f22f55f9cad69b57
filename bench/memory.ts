// Embedded-store benchmark (`npm run bench:memory`): decisions/s per algorithm through RateLimiter +
// MemoryStore (awaited `limit`, big limits, lapsed keys, and `limitSync`), side by side with
// rate-limiter-flexible's RateLimiterMemory and a bare Map counter
// (the physical limit), plus heap bytes per key. Not a test: the numbers depend on the machine.
//
// Measured as a server runs them: every contender is made once, warmed by one discarded round,
// and kept for all rounds; each request builds its key string, as a server builds it from the
// request (a fresh string whose hash the Map computes again). Each contender runs in a process of
// its own, as a server runs one limiter setup; and the five-in-one group (bench/memory-five.ts)
// runs five limiters of different algorithms in one process with prebuilt keys, as an app with
// several limiters does, beside rate-limiter-flexible and the floors in that same process.
//
// Options: --ops N (decisions per measurement, default 1 000 000), --rounds R (default 5),
// --keys K (distinct keys, default 10 000), --heap-keys H (keys for the bytes-per-key figure, a
// comma-separated list, default 100000,1000000), --base DIR (a checkout of another revision with this
// bench copied into DIR/bench: its limiters run beside these, in the same rounds, as `base …` rows).

import { fork, spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { formatBytes, formatCount, interleavedRounds, printTable, ratio, writeResults, type Contender } from './support.js'
import { ALGORITHMS, BIG_LIMITS, HEAP_KEYS, KEYS, OPS, ROUNDS, values } from './memory-options.js'
import {
  apiFloor,
  bareMap,
  boundedFloor,
  boundedSyncFloor,
  coreOnly,
  floodgate,
  floodgateBig,
  floodgateLapse,
  floodgateSync,
  promiseFloor,
  rateLimiterFlexible,
  storeOnly,
  syncFloor,
} from './memory-contenders.js'
import { measureRow, memoryPerKey } from './memory-heap.js'
import { FIVE_FLOOR, FIVE_GROUP, FIVE_RLF, FIVE_SYNC_FLOOR, fiveInOne, fiveNames } from './memory-five.js'

// Heap measurements need global.gc: re-run this file with --expose-gc when it is missing. Children
// run with this process's own flags (the tsx loader under `npm run`, none for compiled sources).
const gc = (globalThis as { gc?: () => void }).gc
const SELF = fileURLToPath(import.meta.url)
const BASE_PREFIX = 'base '
if (gc === undefined) {
  const child = spawnSync(
    process.execPath,
    ['--expose-gc', ...process.execArgv, fileURLToPath(import.meta.url), ...process.argv.slice(2)],
    { stdio: 'inherit' },
  )
  process.exit(child.status ?? 1)
}

function allContenders(): Contender[] {
  return [
    ...ALGORITHMS.map(floodgate),
    ...BIG_LIMITS.map(floodgateBig),
    floodgateLapse('fixed-window', false),
    floodgateLapse('fixed-window', true),
    floodgateLapse('gcra', false),
    floodgateLapse('gcra', true),
    ...ALGORITHMS.map(floodgateSync),
    coreOnly,
    storeOnly,
    apiFloor,
    promiseFloor,
    syncFloor,
    boundedFloor,
    boundedSyncFloor,
    rateLimiterFlexible,
    bareMap,
  ]
}

/**
 * The contenders named `names`, kept and measured in one child process between rounds: a
 * contender of its own (`--contender`), or a group that shares its process (`--group`).
 */
function inProcess(names: readonly string[], flag: string[], entry = SELF, prefix = ''): (Contender & { stop: () => void })[] {
  const child = fork(entry, [...process.argv.slice(2), ...flag], { execArgv: process.execArgv })
  const answers: ((value: number) => void)[] = []
  child.on('message', (value) => answers.shift()?.(value as number))
  child.on('exit', (code) => {
    if (answers.length > 0) {
      console.error(`${names.join(', ')}: its process exited (${code}) before answering`)
      process.exit(1)
    }
  })
  return names.map((name) => ({
    name: `${prefix}${name}`,
    measure: () =>
      new Promise<number>((resolve) => {
        answers.push(resolve)
        child.send(name)
      }),
    stop: () => void (child.connected && child.disconnect()),
  }))
}

/** Each row's ratios to the named baselines, as a table. */
function ratioTable(results: { name: string; median: number }[], baselines: [string, string][], title: string): void {
  const rate = (name: string) => results.find((r) => r.name === name)!.median
  printTable(
    ['contender', 'decisions/s', ...baselines.map(([label]) => label)],
    results.map((r) => [r.name, formatCount(r.median), ...baselines.map(([, name]) => ratio(r.median, rate(name)))]),
    title,
  )
}

async function main(): Promise<void> {
  console.log(
    `bench:memory — ${formatCount(OPS)} decisions per measurement over ${formatCount(KEYS)} keys, ` +
      `${ROUNDS} rounds (median), one process per contender and one for the five-in-one group, Node ${process.version}`,
  )
  const fiveOnly = values['five-only'] === true
  const contenders = [
    ...(fiveOnly ? [] : allContenders().flatMap((contender) => inProcess([contender.name], ['--contender', contender.name]))),
    ...inProcess(fiveNames(), ['--group', FIVE_GROUP]),
  ]
  if (values.base !== undefined) {
    // The other revision's limiters (limit and limitSync per algorithm, and its five-in-one group).
    const entry = join(values.base, 'bench/memory.ts')
    const own = ALGORITHMS.flatMap((algorithm) => [`floodgate ${algorithm}`, `floodgate ${algorithm} limitSync`])
    if (!fiveOnly) contenders.push(...own.flatMap((name) => inProcess([name], ['--contender', name], entry, BASE_PREFIX)))
    contenders.push(...inProcess(fiveNames(), ['--group', FIVE_GROUP], entry, BASE_PREFIX))
  }
  // One discarded round makes every instance and warms it (JIT, its keys) before anything counts.
  for (const contender of contenders) await contender.measure()
  const results = await interleavedRounds(contenders, ROUNDS, (name, round, value) => {
    process.stdout.write(`  round ${round + 1} ${name}: ${formatCount(value)}/s\n`)
  })
  for (const contender of contenders) contender.stop()
  const five = new Set([...fiveNames(), ...fiveNames().map((name) => `${BASE_PREFIX}${name}`)])
  if (!fiveOnly)
    ratioTable(
      results.filter((r) => !five.has(r.name)),
      [
        ['vs rlf', rateLimiterFlexible.name],
        ['vs bare Map', bareMap.name],
        ['vs floor', apiFloor.name],
        ['vs sync floor', syncFloor.name],
        ['vs bounded', boundedFloor.name],
        ['vs bounded sync', boundedSyncFloor.name],
      ],
      'Throughput, each contender in its own process (median; targets: limit() ≥ 1.5x rlf and ≥ 0.75x the floor, limitSync ≥ 3x rlf)',
    )
  ratioTable(
    results.filter((r) => five.has(r.name)),
    [
      ['vs rlf', FIVE_RLF],
      ['vs floor', FIVE_FLOOR],
      ['vs sync floor', FIVE_SYNC_FLOOR],
    ],
    'Throughput, five limiters of different algorithms in one process, prebuilt keys (median; rlf and floors in that process)',
  )
  if (fiveOnly) return
  const rate = (name: string) => results.find((r) => r.name === name)!.median
  printTable(
    ['row', 'decisions/s', 'live row', 'live / row (target ≤ 2x)'],
    [
      ...BIG_LIMITS.map(([algorithm, limit]) => `floodgate ${algorithm} ${limit === 1e6 ? '1e6' : '1e5'}/h`),
      'floodgate fixed-window lapsed keys',
      'floodgate gcra lapsed keys',
    ].map((name) => {
      const live = name.endsWith('lapsed keys') ? name.replace('lapsed', 'live') : `floodgate ${name.split(' ')[1]}`
      return [name, formatCount(rate(name)), live, ratio(rate(live), rate(name))]
    }),
    'Big limits and lapsed keys against live ones',
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

if (values.contender !== undefined || values.group !== undefined) {
  const kept = values.group === FIVE_GROUP ? fiveInOne() : allContenders().filter((candidate) => candidate.name === values.contender)
  if (kept.length === 0) throw new Error(`no contender or group ${values.contender ?? values.group}`)
  process.on('message', async (name) => process.send!(await kept.find((contender) => contender.name === name)!.measure()))
} else if (values['heap-one'] !== undefined) {
  process.stdout.write(`${JSON.stringify({ bytes: await measureRow(values['heap-one'], HEAP_KEYS[0]) })}\n`)
  process.exit(0)
} else {
  await main()
}
