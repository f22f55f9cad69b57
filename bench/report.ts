// `npm run bench:report`: runs the memory, Redis and service benchmarks one after the other, collects
// their figures (BENCH_JSON) and writes docs/benchmarks.md with SVG charts (bench/charts.ts, echarts),
// stating the machine and the version of every contender. Run it under the shared lock:
//
//   npm run bench:report             full sizes (minutes), into docs/
//   npm run bench:report -- --quick --out DIR                         reduced sizes (seconds), for CI's check

import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { cpus, release, tmpdir, totalmem, type as osType } from 'node:os'
import { extname, join, relative } from 'node:path'
import { parseArgs } from 'node:util'
import { type MemoryResults, type RedisMemoryResults, type RedisResults, type ServiceResults, reportCharts } from './report-charts.js'
import { formatBytes, formatCount, ratio } from './support.js'
import { FIVE_FLOOR, FIVE_PREFIX, FIVE_RLF } from './memory-five-names.js'

const { values: flags } = parseArgs({ options: { quick: { type: 'boolean', default: false }, out: { type: 'string', default: 'docs' } } })
const QUICK = flags.quick
const OUT = flags.out
const CHARTS = join(OUT, 'benchmarks')
const ROOT = join(import.meta.dirname, '..')

/** Each bench and its sizes: the defaults for a full run, small ones for --quick. */
const RUNS = {
  memory: { file: 'memory', args: QUICK ? ['--ops', '5000', '--rounds', '1', '--keys', '1000', '--heap-keys', '2000'] : [], env: {} },
  redis: {
    file: 'redis',
    args: [],
    env: QUICK
      ? { BENCH_ROUNDS: '1', BENCH_ROUND_MS: '50', BENCH_AUTO_ROUNDS: '1', BENCH_AUTO_ROUND_MS: '50', BENCH_AUTO_WARM_MS: '50' }
      : {},
  },
  redisMemory: { file: 'redis-memory', args: [], env: QUICK ? { BENCH_MEMORY_KEYS: '500' } : {} },
  service: {
    file: 'service',
    args: [],
    env: QUICK
      ? { BENCH_ROUNDS: '1', BENCH_SECONDS: '0.4', BENCH_WARMUP_SECONDS: '0', BENCH_CONNECTIONS: '16', BENCH_GRPC_CALLERS: '16' }
      : {},
  },
} as const

/**
 * Runs one bench in its own process with BENCH_JSON set, and reads what it wrote. A bench that
 * fails is run once more: on a busy machine a store call can miss its timeout, and a gRPC
 * contender gives up on the first error (the retry is printed, so the run's log says so).
 */
function runBench<T>(name: keyof typeof RUNS, dir: string, attempt = 1): T {
  const run = RUNS[name]
  const json = join(dir, `${name}.json`)
  console.log(
    `\n== bench:${name} ${run.args.join(' ')} ${Object.entries(run.env)
      .map(([k, v]) => `${k}=${v}`)
      .join(' ')}`,
  )
  const started = performance.now()
  // The bench runs as this file does: under tsx from the sources, or as the test runner's compiled copy.
  const args = [...process.execArgv, join(ROOT, 'bench', `${run.file}${extname(import.meta.filename)}`), ...run.args]
  const child = spawnSync(process.execPath, args, {
    cwd: ROOT,
    env: { ...process.env, ...run.env, BENCH_JSON: json },
    stdio: ['ignore', 'inherit', 'inherit'],
  })
  if (child.status !== 0) {
    if (attempt === 1) {
      console.log(`== bench:${name} exited with ${child.status ?? child.signal}: running it once more`)
      return runBench<T>(name, dir, 2)
    }
    throw new Error(`bench:${name} exited with ${child.status ?? child.signal}`)
  }
  console.log(`== bench:${name} done in ${((performance.now() - started) / 1000).toFixed(1)} s`)
  return JSON.parse(readFileSync(json, 'utf8')) as T
}

function table(headers: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`
  return [line(headers), `|${headers.map(() => '---').join('|')}|`, ...rows.map(line)].join('\n')
}

/** The installed version of a package, as its package.json says. */
function versionOf(name: string): string {
  const require = createRequire(join(ROOT, 'package.json'))
  try {
    return (JSON.parse(readFileSync(require.resolve(`${name}/package.json`), 'utf8')) as { version: string }).version
  } catch {
    // Packages whose exports hide package.json: read it from node_modules directly.
    return (JSON.parse(readFileSync(join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version
  }
}

function main(): void {
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-bench-report-'))
  try {
    // The five-in-one group has its own peer and floors, measured in its process: a table of its own.
    const memory = runBench<MemoryResults>('memory', dir)
    const fiveInOne = memory.throughput.filter((r) => r.name.startsWith(FIVE_PREFIX))
    memory.throughput = memory.throughput.filter((r) => !r.name.startsWith(FIVE_PREFIX))
    const redis = runBench<RedisResults>('redis', dir)
    const redisMemory = runBench<RedisMemoryResults>('redisMemory', dir)
    const service = runBench<ServiceResults>('service', dir)
    mkdirSync(CHARTS, { recursive: true })
    const charts = reportCharts({ memory, redis, redisMemory, service })
    for (const [name, text] of Object.entries(charts)) writeFileSync(join(CHARTS, name), text)
    const link = (name: string, alt: string) => `![${alt}](${relative(OUT, join(CHARTS, name)).replaceAll('\\', '/')})`
    writeFileSync(join(OUT, 'benchmarks.md'), report(memory, fiveInOne, redis, redisMemory, service, link))
    console.log(`\nwrote ${join(OUT, 'benchmarks.md')} and ${Object.keys(charts).length} charts in ${CHARTS}`)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

function report(
  memory: MemoryResults,
  fiveInOne: MemoryResults['throughput'],
  redis: RedisResults,
  redisMemory: RedisMemoryResults,
  service: ServiceResults,
  link: (name: string, alt: string) => string,
): string {
  const cpu = cpus()
  const rlfMemory = memory.throughput.find((r) => r.name.startsWith('rate-limiter-flexible'))?.median ?? Number.NaN
  const rlfRedis = redis.throughput.find((r) => r.name === 'rate-limiter-flexible')?.median ?? Number.NaN
  const bare = service.throughput[0]
  const versions: [string, string][] = [
    ['floodgate / floodgate-server', `${versionOf('floodgate')} / ${versionOf('floodgate-server')} (this repository)`],
    ['Node.js', process.version],
    ['redis-server', redis.redisVersion],
    ["ioredis (every Redis contender's client)", versionOf('ioredis')],
    ['rate-limiter-flexible', versionOf('rate-limiter-flexible')],
    ['rate-limit-redis', versionOf('rate-limit-redis')],
    ['fastify (the service and the bare route)', versionOf('fastify')],
    ['@grpc/grpc-js', versionOf('@grpc/grpc-js')],
    ['autocannon (HTTP load)', versionOf('autocannon')],
    ['echarts (these charts)', versionOf('echarts')],
  ]
  const quickNote = QUICK
    ? '\n\n> **Reduced sizes (`--quick`)**: this file checks that the report is produced. Its figures are not measurements.'
    : ''
  const floorOf = (prefix: string) => memory.throughput.find((r) => r.name.startsWith(prefix))?.median ?? Number.NaN
  const asyncFloor = floorOf('floor:')
  const boundedFloor = floorOf('bounded floor:')
  const memoryTable = table(
    ['contender', 'decisions/s', 'vs rate-limiter-flexible', 'vs floor', 'vs bounded floor'],
    memory.throughput.map((r) => [
      r.name,
      formatCount(r.median),
      ratio(r.median, rlfMemory),
      ratio(r.median, asyncFloor),
      ratio(r.median, boundedFloor),
    ]),
  )
  const fiveOf = (name: string) => fiveInOne.find((r) => r.name === name)?.median ?? Number.NaN
  const fiveTable = table(
    ['contender', 'decisions/s', 'vs 5-in-1 rate-limiter-flexible', 'vs 5-in-1 floor'],
    fiveInOne.map((r) => [r.name, formatCount(r.median), ratio(r.median, fiveOf(FIVE_RLF)), ratio(r.median, fiveOf(FIVE_FLOOR))]),
  )
  const redisTable = table(
    ['contender', 'decisions/s', 'vs rate-limiter-flexible', 'failed'],
    redis.throughput.map((r) => [r.name, formatCount(r.median), ratio(r.median, rlfRedis), formatCount(r.failed)]),
  )
  const serviceTable = table(
    ['contender', 'requests/s', 'vs bare route', 'server CPU per request'],
    service.throughput.map((r) => [r.name, formatCount(r.median), ratio(r.median, bare.median), `${r.cpuMicrosPerRequest.toFixed(1)} µs`]),
  )
  const percentiles = Object.keys(service.latencyMs[0]?.percentiles ?? {})
  const latencyTable = table(
    ['contender', ...percentiles.map((k) => k.replace('_', '.'))],
    service.latencyMs.map((r) => [r.name, ...percentiles.map((k) => String(r.percentiles[k]))]),
  )
  const usedMemoryTable = table(
    ['keys', 'layout', 'used_memory per key'],
    redisMemory.usedMemoryPerKey.map((r) => [formatCount(r.keys), r.layout, `${Math.round(r.bytesPerKey)} B`]),
  )
  return `# Benchmarks

Produced by \`npm run bench:report\` (bench/report.ts), which runs \`bench:memory\`, \`bench:redis\`,
\`bench:redis-memory\` and \`bench:service\` one after the other and charts their figures.${quickNote}
Every figure is a median of interleaved rounds (each round runs every contender once, so a slow
phase of the machine hits them all), and ratios compare contenders of the same run. Absolute numbers
depend on the machine; compare the ratios. In the bar charts Floodgate's contenders are blue, other
libraries orange, and floors and bare servers (what no product beats; not products) grey.

## Machine

- ${cpu.length} × ${cpu[0]?.model ?? 'unknown CPU'}, ${formatBytes(totalmem())} RAM, ${osType()} ${release()}
- Benchmarks share the machine with their load generators (and, on a shared host, other work): the
  Redis and service figures include the client's CPU cost on the same cores.

${table(['component', 'version'], versions)}

## Embedded store

\`bench:memory\`: ${formatCount(memory.ops)} decisions per measurement over ${formatCount(memory.keys)} keys,
rounds: ${memory.rounds}; each contender made once in a process of its own, warmed by a discarded round and kept for
every round; each request builds its key string, as a server does; every request admitted. The floors are not products:
the core alone, and what any in-process limiter call costs at least (an async call, a Map read, the clock, a decision
object; the sync floor is the same without the async call, for \`limitSync\`). The bounded floors add the least that a
limiter keeping its states within a bound must do on this core: an index into one typed array of states, the shared
algorithm step, the state written back, the cheapest LRU upkeep; no policy sets, modes, eviction classes or byte count.

${link('memory-throughput.svg', 'Embedded store decisions per second')}

${memoryTable}

Five limiters of different algorithms alive in one process, with prebuilt keys, as an app with several
limiters runs them (\`bench/memory-five.ts\`); rate-limiter-flexible and the floors are measured in that
same process:

${fiveTable}

${link('memory-per-key.svg', 'Heap bytes per key')}

${table(
  ['store', 'heap per key'],
  memory.heapBytesPerKey.map((r) => [r.name, formatBytes(r.bytes)]),
)}

## Redis

\`bench:redis\`: ${redis.callers} concurrent callers over ${formatCount(redis.keys)} keys against one local redis-server,
rounds: ${redis.rounds} of ${formatCount(redis.roundMs)} ms per contender; every contender uses ioredis with auto-pipelining,
and every request is admitted.
Raw \`INCR\` (one command per request, no limiting logic) is the floor a Redis limiter cannot beat by much. The
in-process floor (a Map read, the clock and a decision, no store) is the most any sync mode that answers in-process could
make under the same load.

${link('redis-throughput.svg', 'Redis decisions per second')}

${redisTable}

${link('redis-memory-per-key.svg', 'Redis memory per key')}

${table(
  ['algorithm', 'state', 'MEMORY USAGE'],
  redisMemory.memoryUsagePerKey.map((r) => [r.algorithm, r.state, `${r.bytes} B`]),
)}

\`bench:redis-memory\`: \`used_memory\` grown per active key (allocator and dictionary overhead included), for
Floodgate's records and for reference layouts (plain strings, hash buckets):

${usedMemoryTable}

## Service

\`bench:service\`: each contender in a server process of its own, loaded by autocannon (${service.connections} HTTP
connections) and a grpc-js client (${service.grpcCallers} concurrent calls), rounds: ${service.rounds} of ${service.seconds} s
per contender; the bare Fastify route parses the same body and answers a JSON body of the same size, with no limiting:
the ceiling for the HTTP API.

${link('service-throughput.svg', 'Service requests per second')}

${serviceTable}

${link('latency.svg', 'HTTP latency by percentile')}

Latency is what autocannon's ${service.connections} connections saw at full load (closed loop: each connection sends its
next request when the answer arrives), in milliseconds; autocannon counts whole milliseconds, so
values under 1 ms show as 0 (drawn at 0.1 on the log axis).

${latencyTable}
`
}

main()
