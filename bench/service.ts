// `npm run bench:service`: requests/s of the standalone service — POST /v1/check on the embedded store and
// on Redis, side by side with a bare Fastify route answering a same-sized JSON body (the limit), and gRPC
// ShouldRateLimit calls/s with many concurrent calls, side by side with bare gRPC servers: grpc-js with
// proto-loader (and around the same Decider: the service's transport before), grpc-js with protobufjs
// codecs, Connect-ES, and node:http2 answering a fixed frame (the floor). Not a test: numbers only.
//
// The servers run in a child process (their own event loop, as in production); autocannon and the
// gRPC client run here. Each contender first runs once unmeasured (BENCH_WARMUP_SECONDS, default 2),
// so no contender is measured on cold code. Besides requests/s, the table shows the server process's
// CPU time per request: on a shared machine it moves less than a rate does, and it does not depend
// on whether the load generator keeps the server busy. Environment knobs: BENCH_ROUNDS (default 3),
// BENCH_SECONDS (default 5 per contender and round), BENCH_CONNECTIONS (default 64),
// BENCH_GRPC_CALLERS (default 128 calls in flight), BENCH_GRPC_SESSIONS (default 4 HTTP/2 connections),
// BENCH_ONLY (a regular expression: only the contenders whose names match).

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import protobuf from 'protobufjs'
import { startRedis } from '../packages/floodgate/test/support/redis-server.js'
import { grpcFrame, LeanGrpcClient } from './grpc-client.js'
import { startServer, type Role, type Servers } from './service-servers.js'
import { formatCount, interleavedRounds, median, printTable, ratio, runLoad, writeResults, type Contender } from './support.js'

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5)
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64)
const GRPC_CALLERS = Number(process.env.BENCH_GRPC_CALLERS ?? 128)
const GRPC_SESSIONS = Number(process.env.BENCH_GRPC_SESSIONS ?? 4)
const ONLY = process.env.BENCH_ONLY === undefined ? undefined : new RegExp(process.env.BENCH_ONLY)
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 2)
const USERS = 10_000
const SHOULD_RATE_LIMIT = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit'
const TARGET = 0.85

// High limits: every request is admitted, so every contender does the same (charging) work.
const RULES = `
domain: bench
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 1000000000 }
`

/** The part of autocannon's programmatic API used here (it ships no types). */
type Autocannon = (options: {
  url: string
  connections: number
  duration: number
  requests: {
    method: string
    headers: Record<string, string>
    setupRequest: (request: Record<string, unknown>) => Record<string, unknown>
  }[]
}) => Promise<{
  requests: { average: number; total: number }
  latency: Record<string, number>
  non2xx: number
  errors: number
  timeouts: number
}>
const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon

/** One measurement: the rate, and the server process's CPU time (user + system) per operation. */
interface Sample {
  perSecond: number
  cpuMicrosPerOp: number
}

async function main(): Promise<void> {
  const redis = await startRedis()
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-bench-service-'))
  const rulesFile = join(dir, 'rules.yaml')
  writeFileSync(rulesFile, RULES)
  const servers: Servers[] = []
  const start = async (role: Role, extra: string[] = []) => {
    const server = await startServer(role, [rulesFile, redis.url, ...extra])
    servers.push(server)
    return server
  }
  const clients: LeanGrpcClient[] = []
  try {
    const memory = await start('memory')
    const checkBytes = memory.ready.bodyBytes!
    // The limit: the same framework parsing the same body and sending a JSON answer of the same size.
    const bare = await start('bare', [String(checkBytes)])
    const redisService = await start('redis')
    const bodies = Array.from({ length: USERS }, (_, i) =>
      JSON.stringify({ domain: 'bench', descriptors: [[{ key: 'user', value: `u${i}` }]] }),
    )
    // Each HTTP round's latency percentiles, per contender (warm-up runs left out).
    const latencies = new Map<string, Record<string, number>[]>()
    let warm = WARMUP_SECONDS === 0
    const http = (name: string, server: Servers, path: string): Measured => ({
      name,
      server,
      run: async (seconds) => {
        const port = server.ready.http!
        const result = await hammer(`http://127.0.0.1:${port}${path}`, bodies, seconds)
        if (warm) latencies.set(name, [...(latencies.get(name) ?? []), result.latency])
        return result
      },
    })
    const frames = requestFrames()
    const grpc = async (name: string, server: Servers): Promise<Measured> => {
      // One long-lived client per contender, connected before any measuring and warmed with the rest.
      const client = await LeanGrpcClient.connect(server.ready.grpc!, GRPC_SESSIONS)
      clients.push(client)
      return { name, server, run: (seconds) => callLoad(client, frames, seconds) }
    }
    const all: Measured[] = [
      http('bare Fastify route (same-sized JSON)', bare, '/bare'),
      http('POST /v1/check, embedded store', memory, '/v1/check'),
      http('POST /v1/check, Redis', redisService, '/v1/check'),
      await grpc(GRPC_FLOOR, await start('floor')),
      await grpc('bare grpc-js + proto-loader', await start('grpcJs')),
      await grpc('bare grpc-js + protobufjs codecs', await start('grpcJsStatic')),
      await grpc('bare Connect-ES (connect-node)', await start('connect')),
      await grpc(GRPC_BEFORE, await start('grpcJsService')),
      await grpc('gRPC ShouldRateLimit, embedded store', memory),
      await grpc('gRPC ShouldRateLimit, Redis', redisService),
    ]
    const measured = all.filter((m) => ONLY === undefined || ONLY.test(m.name))
    console.log(
      `service benchmark: ${ROUNDS} rounds × ${SECONDS}s per contender (after ${WARMUP_SECONDS}s warm-up each), ` +
        `${CONNECTIONS} HTTP connections, ` +
        `${GRPC_CALLERS} concurrent gRPC calls over ${GRPC_SESSIONS} HTTP/2 connections`,
    )
    console.log(`answer bodies: bare route ${bare.ready.bodyBytes} B, /v1/check ${checkBytes} B; one server process per contender`)
    if (WARMUP_SECONDS > 0) for (const m of measured) await m.run(WARMUP_SECONDS)
    warm = true
    const cpu = new Map<string, number[]>(measured.map((m) => [m.name, []]))
    const contenders: Contender[] = measured.map((m) => ({
      name: m.name,
      async measure() {
        const sample = await sampleWithCpu(m.server, () => m.run(SECONDS))
        cpu.get(m.name)!.push(sample.cpuMicrosPerOp)
        return sample.perSecond
      },
    }))
    const results = await interleavedRounds(contenders, ROUNDS, (name, round, value) =>
      console.log(`  round ${round + 1}: ${name}: ${formatCount(value)}/s, server CPU ${cpu.get(name)!.at(-1)!.toFixed(1)} µs per request`),
    )
    printHttp(
      results.filter((r) => !isGrpc(r.name)),
      cpu,
    )
    printGrpc(
      results.filter((r) => isGrpc(r.name)),
      cpu,
    )
    writeResults({
      rounds: ROUNDS,
      seconds: SECONDS,
      connections: CONNECTIONS,
      grpcCallers: GRPC_CALLERS,
      throughput: results.map(({ name, median: rate, samples }) => ({
        name,
        median: rate,
        samples,
        cpuMicrosPerRequest: median(cpu.get(name)!),
      })),
      // autocannon's latency percentiles (ms) of each HTTP contender, the median of its rounds per percentile.
      latencyMs: [...latencies].map(([name, rounds]) => ({
        name,
        percentiles: Object.fromEntries(Object.keys(rounds[0]).map((key) => [key, median(rounds.map((round) => round[key]))])),
      })),
    })
  } finally {
    for (const client of clients) client.close()
    await Promise.all(
      servers.map((server) => {
        server.child.kill('SIGTERM')
        return new Promise((resolve) => server.child.once('exit', resolve))
      }),
    )
    await redis.stop()
    rmSync(dir, { recursive: true, force: true })
  }
}

const GRPC_FLOOR = 'floor: node:http2, fixed gRPC frame'
const GRPC_BEFORE = 'grpc-js + proto-loader service path (before)'
const isGrpc = (name: string) => !name.includes('Fastify') && !name.includes('/v1/check')
type Result = { name: string; median: number }

function printHttp(results: Result[], cpu: Map<string, number[]>): void {
  const bareResult = results.find((r) => r.name.startsWith('bare Fastify'))
  if (bareResult === undefined) return
  const bare = bareResult.median
  const bareCpu = median(cpu.get(bareResult.name)!)
  printTable(
    ['contender', 'median req/s', 'vs bare route', 'server CPU µs/req', 'bare CPU / this CPU'],
    results.map((r) => {
      const micros = median(cpu.get(r.name)!)
      return [r.name, formatCount(r.median), ratio(r.median, bare), micros.toFixed(1), ratio(bareCpu, micros)]
    }),
    `Median of ${ROUNDS} rounds (target: /v1/check ≥ ${TARGET * 100}% of the bare route)`,
  )
  for (const r of results.filter((r) => r !== bareResult)) {
    const share = r.median / bare
    const cpuShare = bareCpu / median(cpu.get(r.name)!)
    console.log(
      `${r.name}: ${(share * 100).toFixed(0)}% of the bare route's rate, ${(cpuShare * 100).toFixed(0)}% by server CPU per request — ` +
        `${share >= TARGET ? 'meets' : 'below'} the ${TARGET * 100}% target`,
    )
  }
}

/** The gRPC table: each contender against the floor and against the service's transport before. */
function printGrpc(results: Result[], cpu: Map<string, number[]>): void {
  if (results.length === 0) return
  const floor = results.find((r) => r.name === GRPC_FLOOR)
  const before = results.find((r) => r.name === GRPC_BEFORE)
  const cpuOf = (r: Result | undefined) => (r === undefined ? Number.NaN : median(cpu.get(r.name)!))
  printTable(
    ['gRPC contender', 'median calls/s', 'vs floor', 'vs before', 'server CPU µs/call', 'floor CPU / this CPU', 'before CPU / this CPU'],
    results.map((r) => {
      const micros = cpuOf(r)
      return [
        r.name,
        formatCount(r.median),
        ratio(r.median, floor?.median ?? 0),
        ratio(r.median, before?.median ?? 0),
        micros.toFixed(1),
        ratio(cpuOf(floor), micros),
        ratio(cpuOf(before), micros),
      ]
    }),
    `gRPC, median of ${ROUNDS} rounds (${GRPC_CALLERS} calls in flight over ${GRPC_SESSIONS} connections)`,
  )
}

/** The benchmark's RateLimitRequests, one per user, encoded and framed once. */
function requestFrames(): Buffer[] {
  const root = new protobuf.Root()
  const dir = fileURLToPath(new URL('../packages/floodgate-server/src/service/proto/', import.meta.url))
  root.resolvePath = (_origin, target) => dir + target
  root.loadSync('envoy/service/ratelimit/v3/rls.proto', { keepCase: true })
  const type = root.lookupType('envoy.service.ratelimit.v3.RateLimitRequest')
  return Array.from({ length: USERS }, (_, i) =>
    grpcFrame(type.encode({ domain: 'bench', descriptors: [{ entries: [{ key: 'user', value: `u${i}` }] }] }).finish()),
  )
}

/** A contender before its samples are taken: runs its load for some seconds and gives operations/s and the count. */
interface Measured {
  name: string
  /** The server process it loads, whose CPU time is read around each round. */
  server: Servers
  run: (seconds: number) => Promise<{ perSecond: number; ops: number }>
}

/** Runs one load and reads the server's CPU time around it. */
async function sampleWithCpu(servers: Servers, load: () => Promise<{ perSecond: number; ops: number }>): Promise<Sample> {
  const before = await servers.cpuMicros()
  const { perSecond, ops } = await load()
  const after = await servers.cpuMicros()
  return { perSecond, cpuMicrosPerOp: ops > 0 ? (after - before) / ops : Number.NaN }
}

/** One autocannon run against a JSON POST endpoint, cycling through the bodies; requests/s, the count and latency percentiles (ms). */
async function hammer(
  url: string,
  bodies: string[],
  seconds: number,
): Promise<{ perSecond: number; ops: number; latency: Record<string, number> }> {
  let next = 0
  const result = await autocannon({
    url,
    connections: CONNECTIONS,
    duration: seconds,
    requests: [
      {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        setupRequest: (request) => ({ ...request, body: bodies[next++ % bodies.length] }),
      },
    ],
  })
  if (result.non2xx > 0 || result.errors > 0)
    console.log(`  (${url}: ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts)`)
  const latency: Record<string, number> = {}
  for (const [key, value] of Object.entries(result.latency)) if (/^p\d/.test(key)) latency[key] = value
  return { perSecond: result.requests.average, ops: result.requests.total, latency }
}

/** Closed-loop ShouldRateLimit calls with GRPC_CALLERS in flight, cycling through the users; calls/s and the count. */
async function callLoad(client: LeanGrpcClient, frames: Buffer[], seconds: number): Promise<{ perSecond: number; ops: number }> {
  const failed = new Map<number, number>()
  const result = await runLoad({
    callers: GRPC_CALLERS,
    durationMs: seconds * 1000,
    maxOps: 50_000_000,
    op: async (i) => {
      const status = await client.call(SHOULD_RATE_LIMIT, frames[i % frames.length])
      if (status !== 0) failed.set(status, (failed.get(status) ?? 0) + 1)
    },
  })
  // As for HTTP's non-2xx: said, not hidden (e.g. UNAVAILABLE when a busy machine's Redis misses the store timeout).
  if (failed.size > 0)
    console.log(`  (gRPC: ${[...failed].map(([status, count]) => `${count} calls with grpc-status ${status}`).join(', ')})`)
  return { perSecond: result.perSecond, ops: result.ops }
}

main().catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
