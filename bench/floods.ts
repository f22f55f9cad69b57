// `npm run bench:floods`: a legitimate client's latency while sockets flood the service (issue 26 §5).
// Three processes, as in production: the service (embedded store, examples/rules.yaml), a flood from
// 127.0.0.2 and a legitimate client from 127.0.0.1, all on loopback. Two floods: (a) gRPC: 10,000 idle
// TCP sockets and 2,500 that send only the HTTP/2 preface, at the default --grpc-max-connections;
// (b) HTTP: 4,500 idle sockets against --max-connections 2000. For each the legitimate client calls in
// two ways at once, one call after another with a pause between: on one open connection, and on a new
// connection per call. Printed: its per-call latency p50/p99/max before the flood and during it, the
// sockets the service shed, its descriptors and RSS, and the kernel's accept-queue overflows.
// Bounded: BENCH_FLOOD_SCALE (default 1) scales the socket counts, BENCH_HOLD_SECONDS (default 5) is how
// long the flood holds once connected, BENCH_BASELINE_SECONDS (default 3). BENCH_BARE=1 floods bare
// node:http2 / node:http servers with no Floodgate code instead (a fixed answer, no caps): the floor
// this machine sets. BENCH_PROBE=1 records both processes' event-loop stalls (loop-probe.ts) and says which
// slow calls they overlap; BENCH_SERVICE_ARGS adds flags to the service, BENCH_SERVICE_NODE_ARGS node
// options (e.g. --cpu-prof --cpu-prof-dir=/tmp/p: the service is stopped with SIGTERM so it is written).
// BENCH_ONLY=<regex> runs the floods whose names match. Not a test: numbers only.
// Run it alone: flock /tmp/floodgate-bench.lock npm run bench:floods

import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import http, { request } from 'node:http'
import http2 from 'node:http2'
import { connect, createServer, type Socket } from 'node:net'
import { fileURLToPath } from 'node:url'
import * as grpc from '@grpc/grpc-js'
import { loadRlsPackage } from '../packages/floodgate-server/src/service/grpc-server.js'
import { grpcFrame } from './grpc-client.js'
import { explainAcceptQueue, explainSlowCalls, sampleAcceptQueue, startProbe, type Call, type Stall } from './loop-probe.js'
import { printTable } from './support.js'

const SCALE = Number(process.env.BENCH_FLOOD_SCALE ?? 1)
const HOLD_MS = Number(process.env.BENCH_HOLD_SECONDS ?? 5) * 1000
const BASELINE_MS = Number(process.env.BENCH_BASELINE_SECONDS ?? 3) * 1000
/** Pause between one legitimate call's answer and the next call. */
const PAUSE_MS = 10
const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n')
// 10.0.* is allow-listed in examples/rules.yaml: every call is answered OK, none is counted.
const DESCRIPTOR = { key: 'remote_address', value: '10.0.0.1' }
const here = fileURLToPath(import.meta.url)
const BARE = process.env.BENCH_BARE === '1'
/** BENCH_PROBE=1: record the service's and the client's event-loop stalls and say which slow calls they explain. */
const PROBE = process.env.BENCH_PROBE === '1'
const PROBE_FILE = join(tmpdir(), `floodgate-floods-probe-${process.pid}.jsonl`)

type Surface = 'grpc' | 'http'

// ---- the flood (its own process) -------------------------------------------------------------------

/** Opens `count` sockets from 127.0.0.2 to `port`, 200 connecting at a time, each writing `send` once. */
async function floodProcess(port: number, count: number, send: Buffer | undefined): Promise<void> {
  const sockets: Socket[] = []
  let closed = 0
  for (let done = 0; done < count; done += 200) {
    await Promise.all(
      Array.from({ length: Math.min(200, count - done) }, () => {
        const socket = connect({ port, host: '127.0.0.1', localAddress: '127.0.0.2' })
        sockets.push(socket)
        socket.on('error', () => {})
        socket.on('data', () => {})
        return new Promise<void>((resolve) => {
          socket.once('connect', () => {
            if (send !== undefined) socket.write(send)
            resolve()
          })
          socket.once('close', () => {
            closed++
            resolve()
          })
        })
      }),
    )
  }
  process.send?.({ connected: count, closed })
}

// ---- the legitimate client (its own process) ---------------------------------------------------------

function httpCheck(port: number, agent: import('node:http').Agent | false): Promise<void> {
  const body = JSON.stringify({ domain: 'edge', descriptors: [[DESCRIPTOR]] })
  return new Promise((resolve, reject) => {
    const call = request(
      { host: '127.0.0.1', port, method: 'POST', path: '/v1/check', agent, headers: { 'content-type': 'application/json' } },
      (response) => {
        response.resume()
        response.on('end', () => (response.statusCode === 200 ? resolve() : reject(new Error(`HTTP ${response.statusCode}`))))
      },
    )
    call.on('error', reject)
    call.end(body)
  })
}

function grpcCheck(client: grpc.Client): Promise<void> {
  return new Promise((resolve, reject) =>
    (client as any).ShouldRateLimit({ domain: 'edge', descriptors: [{ entries: [DESCRIPTOR] }] }, (error: Error | null) =>
      error ? reject(error) : resolve(),
    ),
  )
}

/** Calls on an open connection and on a new connection per call until told to stop; sends each call's latency, by phase. */
async function legitProcess(surface: Surface, port: number): Promise<void> {
  const pkg = loadRlsPackage() as any
  const Rls = pkg.envoy.service.ratelimit.v3.RateLimitService
  const newGrpc = () => new Rls(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 })
  const { Agent } = await import('node:http')
  const agent = new Agent({ keepAlive: true, maxSockets: 1 })
  const open = newGrpc()
  let phase = 'before'
  let stopped = false
  const latencies: Record<string, number[]> = {}
  const errors: Record<string, number> = {}
  const calls: Call[] = []
  const stalls: Stall[] = []
  if (PROBE) startProbe((stall) => phase !== 'before' && stalls.push(stall))
  process.on('message', (message: { phase?: string; stop?: boolean }) => {
    if (message.phase !== undefined) phase = message.phase
    if (message.stop) stopped = true
  })
  // A call resolves with the milliseconds its connection took to be ready, when it made one and measured it.
  const loop = async (way: string, call: () => Promise<number | void>) => {
    while (!stopped) {
      const key = `${way} ${phase}`
      const started = performance.now()
      try {
        const connectMs = await call()
        const ms = performance.now() - started
        ;(latencies[key] ??= []).push(ms)
        if (phase !== 'before') calls.push({ at: performance.timeOrigin + started, ms, connectMs: connectMs ?? undefined })
      } catch {
        errors[key] = (errors[key] ?? 0) + 1
      }
      await new Promise((resolve) => setTimeout(resolve, PAUSE_MS))
    }
  }
  const once = async () => {
    const client = newGrpc()
    try {
      if (!PROBE) return await grpcCheck(client)
      // Probed: the connection made ready first, so a slow call tells its connect from its answer.
      const started = performance.now()
      await new Promise<void>((resolve, reject) =>
        client.waitForReady(Date.now() + 10_000, (error?: Error) => (error ? reject(error) : resolve())),
      )
      const connectMs = performance.now() - started
      await grpcCheck(client)
      return connectMs
    } finally {
      client.close()
    }
  }
  process.send?.({ ready: true })
  if (surface === 'grpc') await Promise.all([loop('open connection', () => grpcCheck(open)), loop('new connection', once)])
  else await Promise.all([loop('open connection', () => httpCheck(port, agent)), loop('new connection', () => httpCheck(port, false))])
  open.close()
  agent.destroy()
  process.send?.({ latencies, errors, calls, stalls }, () => process.exit(0))
}

// ---- the floor: bare servers (their own process) -----------------------------------------------------

/** node:http2 answering every call with an empty message and grpc-status 0, node:http with a fixed JSON; no caps. */
async function bareProcess(): Promise<void> {
  const answer = grpcFrame(new Uint8Array(0))
  const grpcServer = http2.createServer()
  grpcServer.on('stream', (stream) => {
    stream.on('data', () => {})
    stream.on('end', () => {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true })
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }))
      stream.end(answer)
    })
  })
  const httpServer = http.createServer((req, res) => {
    req.resume()
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"overallCode":"OK"}'))
  })
  const listen = (server: http.Server | http2.Http2Server) =>
    new Promise<number>((resolve) => server.listen(0, '127.0.0.1', 4096, () => resolve((server.address() as { port: number }).port)))
  process.send?.({ httpPort: await listen(httpServer), grpcPort: await listen(grpcServer) })
}

// ---- the coordinator ---------------------------------------------------------------------------------

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** A process of this bench; `env` adds to the environment (the probe's file, for the service's process). */
function child(args: string[], env: Record<string, string> = {}): ChildProcess {
  return spawn(process.execPath, [...process.execArgv, here, ...args], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    env: { ...process.env, ...env },
  })
}

/** The environment that starts loop-probe.ts in the service's process (it records into PROBE_FILE). */
const probeEnv = (): Record<string, string> => (PROBE ? { BENCH_PROBE_FILE: PROBE_FILE } : {})

function readStalls(): Stall[] {
  if (!existsSync(PROBE_FILE)) return []
  return readFileSync(PROBE_FILE, 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Stall)
}

const nextMessage = <T>(process: ChildProcess, has: keyof T) =>
  new Promise<T>((resolve) => {
    const on = (message: T) => {
      if (message !== null && typeof message === 'object' && has in (message as object)) {
        process.off('message', on)
        resolve(message)
      }
    }
    process.on('message', on)
  })

/** The service's process: descriptors and resident memory. */
function processStats(pid: number): { fds: number; rssMiB: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const rssKiB = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? Number.NaN)
  return { fds: readdirSync(`/proc/${pid}/fd`).length, rssMiB: rssKiB / 1024 }
}

/** TcpExt ListenOverflows (SYNs or handshake ACKs the kernel dropped with a full accept queue), system-wide. */
function listenOverflows(): number {
  const lines = readFileSync('/proc/net/netstat', 'utf8').split('\n')
  const names = lines.find((line) => line.startsWith('TcpExt:'))?.split(/\s+/) ?? []
  const values = lines.filter((line) => line.startsWith('TcpExt:'))[1]?.split(/\s+/) ?? []
  return Number(values[names.indexOf('ListenOverflows')] ?? Number.NaN)
}

async function metrics(httpPort: number): Promise<Map<string, number>> {
  if (BARE) return new Map()
  const text = await (await fetch(`http://127.0.0.1:${httpPort}/metrics`)).text()
  const values = new Map<string, number>()
  for (const line of text.split('\n')) {
    if (!line.startsWith('floodgate_connections')) continue
    const at = line.lastIndexOf(' ')
    values.set(line.slice(0, at), Number(line.slice(at + 1)))
  }
  return values
}

function quantiles(values: readonly number[] | undefined): string[] {
  if (values === undefined || values.length === 0) return ['0', '-', '-', '-']
  const sorted = [...values].sort((a, b) => a - b)
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))].toFixed(1)
  return [String(sorted.length), at(0.5), at(0.99), sorted[sorted.length - 1].toFixed(1)]
}

async function startService(args: string[]): Promise<{ service: ChildProcess; httpPort: number; grpcPort: number }> {
  if (BARE) {
    const service = child(['--bare'], probeEnv())
    return { service, ...(await nextMessage<{ httpPort: number; grpcPort: number }>(service, 'httpPort')) }
  }
  const [httpPort, grpcPort] = [await freePort(), await freePort()]
  const cli = fileURLToPath(new URL('../packages/floodgate-server/src/cli.ts', import.meta.url))
  const config = fileURLToPath(new URL('../examples/rules.yaml', import.meta.url))
  const service = spawn(
    process.execPath,
    [
      ...process.execArgv,
      ...(process.env.BENCH_SERVICE_NODE_ARGS?.split(' ').filter((arg) => arg !== '') ?? []),
      ...(PROBE ? ['--import', fileURLToPath(new URL('./loop-probe.ts', import.meta.url))] : []),
      cli,
      'serve',
      '--config',
      config,
      '--host',
      '127.0.0.1',
      '--http-port',
      String(httpPort),
      '--grpc-port',
      String(grpcPort),
      ...args,
      // BENCH_SERVICE_ARGS: more flags for the service (e.g. the old behaviour, to compare in one session).
      ...(process.env.BENCH_SERVICE_ARGS?.split(' ').filter((arg) => arg !== '') ?? []),
    ],
    { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, ...probeEnv() } },
  )
  for (;;) {
    try {
      if ((await fetch(`http://127.0.0.1:${httpPort}/healthz`)).ok) break
    } catch {}
    if (service.exitCode !== null) throw new Error(`the service exited with ${service.exitCode}`)
    await sleep(100)
  }
  return { service, httpPort, grpcPort }
}

interface Flood {
  name: string
  surface: Surface
  serviceArgs: string[]
  waves: { count: number; send?: Buffer }[]
}

async function runFlood(flood: Flood): Promise<void> {
  rmSync(PROBE_FILE, { force: true })
  const { service, httpPort, grpcPort } = await startService(flood.serviceArgs)
  const port = flood.surface === 'grpc' ? grpcPort : httpPort
  try {
    const legit = child(['--legit', flood.surface, String(port)])
    await nextMessage<{ ready: boolean }>(legit, 'ready')
    await sleep(BASELINE_MS)
    const before = { ...processStats(service.pid!), overflows: listenOverflows(), metrics: await metrics(httpPort) }
    legit.send({ phase: 'during flood' })
    let sampling = PROBE
    const queue = PROBE ? sampleAcceptQueue(port, () => !sampling) : Promise.resolve([])
    const floods: ChildProcess[] = []
    const connected: { connected: number; closed: number }[] = []
    for (const wave of flood.waves) {
      const process = child(['--flood', String(port), String(wave.count), wave.send?.toString('hex') ?? '-'])
      floods.push(process)
      connected.push(await nextMessage<{ connected: number; closed: number }>(process, 'connected'))
    }
    await sleep(HOLD_MS)
    const during = { ...processStats(service.pid!), overflows: listenOverflows(), metrics: await metrics(httpPort) }
    legit.send({ stop: true })
    sampling = false
    const result = await nextMessage<{
      latencies: Record<string, number[]>
      errors: Record<string, number>
      calls: Call[]
      stalls: Stall[]
    }>(legit, 'latencies')
    for (const process of floods) process.kill('SIGKILL')
    const rows = Object.keys(result.latencies)
      .sort()
      .map((key) => [key, ...quantiles(result.latencies[key]), String(result.errors[key] ?? 0)])
    printTable(['legitimate calls', 'calls', 'p50 ms', 'p99 ms', 'max ms', 'failed'], rows, flood.name)
    const shed = [...during.metrics]
      .filter(([name]) => name.startsWith(`floodgate_connections_closed_total{server="${flood.surface}"`))
      .map(([name, value]) => `${/reason="(\w+)"/.exec(name)?.[1]} ${value - (before.metrics.get(name) ?? 0)}`)
    const open = during.metrics.get(`floodgate_connections{server="${flood.surface}"}`) ?? '-'
    console.log(
      `flood sockets connected ${connected.map((c) => c.connected).join('+')} ` +
        `(closed while connecting ${connected.map((c) => c.closed).join('+')}); ` +
        `open on the service ${open}; shed: ${shed.join(', ') || 'none'}`,
    )
    console.log(
      `service: descriptors ${before.fds} -> ${during.fds}, RSS ${before.rssMiB.toFixed(0)} -> ${during.rssMiB.toFixed(0)} MiB; ` +
        `kernel ListenOverflows +${during.overflows - before.overflows}\n`,
    )
    if (PROBE) {
      const flooded = result.calls[0]?.at ?? 0
      const lines = explainSlowCalls(
        result.calls,
        readStalls().filter((stall) => stall.at >= flooded),
        result.stalls,
      )
      lines.push(...explainAcceptQueue(result.calls, await queue))
      console.log(`${lines.join('\n')}\n`)
    }
  } finally {
    // SIGTERM first, so a --cpu-prof given in BENCH_SERVICE_NODE_ARGS is written; SIGKILL if it lingers.
    service.kill('SIGTERM')
    await Promise.race([new Promise((resolve) => service.once('exit', resolve)), sleep(5_000)])
    service.kill('SIGKILL')
    rmSync(PROBE_FILE, { force: true })
  }
}

const FLOODS: Flood[] = [
  {
    name: `gRPC: ${10_000 * SCALE} idle sockets + ${2_500 * SCALE} preface-only, default --grpc-max-connections`,
    surface: 'grpc',
    serviceArgs: [],
    waves: [{ count: 10_000 * SCALE }, { count: 2_500 * SCALE, send: PREFACE }],
  },
  {
    name: `HTTP: ${4_500 * SCALE} idle sockets, --max-connections ${2_000 * SCALE}`,
    surface: 'http',
    serviceArgs: ['--max-connections', String(2_000 * SCALE)],
    waves: [{ count: 4_500 * SCALE }],
  },
]

const [role, ...rest] = process.argv.slice(2)
if (role === '--flood') await floodProcess(Number(rest[0]), Number(rest[1]), rest[2] === '-' ? undefined : Buffer.from(rest[2], 'hex'))
else if (role === '--bare') await bareProcess()
else if (role === '--legit') await legitProcess(rest[0] as Surface, Number(rest[1]))
else {
  const only = process.env.BENCH_ONLY === undefined ? undefined : new RegExp(process.env.BENCH_ONLY, 'i')
  for (const flood of FLOODS) if (only === undefined || only.test(flood.name)) await runFlood(flood)
}
