// `npm run bench:service`: requests/s of the standalone service — POST /v1/check on the embedded store and
// on Redis, side by side with a bare Fastify route answering a same-sized JSON body (the limit), and gRPC
// ShouldRateLimit calls/s from a grpc-js client with many concurrent calls. Not a test: numbers only.
//
// The servers run in a child process (their own event loop, as in production); autocannon and the
// gRPC client run here. Environment knobs: BENCH_ROUNDS (default 3), BENCH_SECONDS (default 5 per
// contender and round), BENCH_CONNECTIONS (default 64), BENCH_GRPC_CALLERS (default 128).

import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import * as grpc from '@grpc/grpc-js'
import { startRedis } from '../test/support/redis-server.js'
import { formatCount, interleavedRounds, printTable, ratio, runLoad, type Contender } from './support.js'

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5)
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64)
const GRPC_CALLERS = Number(process.env.BENCH_GRPC_CALLERS ?? 128)
const USERS = 10_000
const TARGET = 0.75

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
  requests: { method: string; headers: Record<string, string>; setupRequest: (request: Record<string, unknown>) => Record<string, unknown> }[]
}) => Promise<{ requests: { average: number }; non2xx: number; errors: number; timeouts: number }>
const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon

interface ServerPorts {
  bare: number
  memory: { http: number; grpc: number }
  redis: { http: number; grpc: number }
}

async function main(): Promise<void> {
  const redis = await startRedis()
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-bench-service-'))
  const rulesFile = join(dir, 'rules.yaml')
  writeFileSync(rulesFile, RULES)
  const { child, ports } = await startServers(rulesFile, redis.url)
  try {
    const bodies = Array.from({ length: USERS }, (_, i) => JSON.stringify({ domain: 'bench', descriptors: [[{ key: 'user', value: `u${i}` }]] }))
    const http = (name: string, port: number, path: string): Contender => ({ name, measure: () => hammer(`http://127.0.0.1:${port}${path}`, bodies) })
    const contenders: Contender[] = [
      http('bare Fastify route (same-sized JSON)', ports.bare, '/bare'),
      http('POST /v1/check, embedded store', ports.memory.http, '/v1/check'),
      http('POST /v1/check, Redis', ports.redis.http, '/v1/check'),
      grpcContender('gRPC ShouldRateLimit, embedded store', ports.memory.grpc),
      grpcContender('gRPC ShouldRateLimit, Redis', ports.redis.grpc),
    ]
    console.log(`service benchmark: ${ROUNDS} rounds × ${SECONDS}s per contender, ${CONNECTIONS} HTTP connections, ${GRPC_CALLERS} concurrent gRPC calls`)
    const results = await interleavedRounds(contenders, ROUNDS, (name, round, value) =>
      console.log(`  round ${round + 1}: ${name}: ${formatCount(value)}/s`),
    )
    const bare = results[0].median
    printTable(
      ['contender', 'median req/s', 'vs bare route'],
      results.map((r) => [r.name, formatCount(r.median), ratio(r.median, bare)]),
      `Median of ${ROUNDS} rounds (target: /v1/check ≥ ${TARGET * 100}% of the bare route)`,
    )
    for (const r of results.slice(1, 3)) {
      console.log(`${r.name}: ${((r.median / bare) * 100).toFixed(0)}% of the bare route — ${r.median / bare >= TARGET ? 'meets' : 'below'} the ${TARGET * 100}% target`)
    }
  } finally {
    child.kill('SIGTERM')
    await new Promise((resolve) => child.once('exit', resolve))
    await redis.stop()
    rmSync(dir, { recursive: true, force: true })
  }
}

/** One autocannon run against a JSON POST endpoint, cycling through the bodies; requests/s. */
async function hammer(url: string, bodies: string[]): Promise<number> {
  let next = 0
  const result = await autocannon({
    url,
    connections: CONNECTIONS,
    duration: SECONDS,
    requests: [
      {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        setupRequest: (request) => ({ ...request, body: bodies[next++ % bodies.length] }),
      },
    ],
  })
  if (result.non2xx > 0 || result.errors > 0) console.log(`  (${url}: ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts)`)
  return result.requests.average
}

function grpcContender(name: string, port: number): Contender {
  return {
    name,
    async measure() {
      const { loadRlsPackage } = await import('../src/service/grpc-server.js')
      const pkg = loadRlsPackage() as unknown as { envoy: { service: { ratelimit: { v3: { RateLimitService: grpc.ServiceClientConstructor } } } } }
      const client = new pkg.envoy.service.ratelimit.v3.RateLimitService(`127.0.0.1:${port}`, grpc.credentials.createInsecure()) as unknown as grpc.Client & {
        ShouldRateLimit(request: unknown, callback: (error: Error | null) => void): void
      }
      try {
        const result = await runLoad({
          callers: GRPC_CALLERS,
          durationMs: SECONDS * 1000,
          maxOps: 50_000_000,
          op: (i) =>
            new Promise<void>((resolve, reject) =>
              client.ShouldRateLimit({ domain: 'bench', descriptors: [{ entries: [{ key: 'user', value: `u${i % USERS}` }] }] }, (error) =>
                error ? reject(error) : resolve(),
              ),
            ),
        })
        return result.perSecond
      } finally {
        client.close()
      }
    },
  }
}

/** Spawns this file in server mode and waits for the ports it listens on. */
function startServers(rulesFile: string, redisUrl: string): Promise<{ child: ChildProcess; ports: ServerPorts }> {
  const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), '--serve', rulesFile, redisUrl], { stdio: ['ignore', 'pipe', 'inherit'] })
  return new Promise((resolve, reject) => {
    let out = ''
    child.stdout!.on('data', (chunk) => {
      out += chunk
      const match = /^READY (.+)$/m.exec(out)
      if (match) resolve({ child, ports: JSON.parse(match[1]) as ServerPorts })
    })
    child.once('exit', (code) => reject(new Error(`benchmark servers exited with ${code}`)))
  })
}

/** Server mode: the bare route and two services (embedded store, Redis), logging silenced. */
async function serve(rulesFile: string, redisUrl: string): Promise<void> {
  const { default: Fastify } = await import('fastify')
  const { pino } = await import('pino')
  const { startService } = await import('../src/service/server.js')
  const { readSettings } = await import('../src/service/settings.js')
  const logger = pino({ level: 'silent' })
  const base = ['--config', rulesFile, '--host', '127.0.0.1', '--http-port', '0', '--grpc-port', '0', '--no-watch']
  const memory = await startService(readSettings(base, {}), { logger })
  const redis = await startService(readSettings([...base, '--redis', redisUrl], {}), { logger })

  // The limit: the same framework parsing the same body and sending a JSON answer of the same size.
  const sample = await fetch(`${memory.httpUrl}/v1/check`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ domain: 'bench', descriptors: [[{ key: 'user', value: 'u0' }]] }),
  })
  const size = (await sample.text()).length
  const answer = { allowed: true, padding: '' }
  answer.padding = 'x'.repeat(Math.max(0, size - JSON.stringify(answer).length))
  const bare = Fastify()
  bare.post('/bare', async (request) => (request.body === undefined ? {} : answer))
  await bare.listen({ host: '127.0.0.1', port: 0 })

  const ports: ServerPorts = {
    bare: (bare.server.address() as { port: number }).port,
    memory: { http: memory.httpPort, grpc: memory.grpcPort },
    redis: { http: redis.httpPort, grpc: redis.grpcPort },
  }
  process.stdout.write(`READY ${JSON.stringify(ports)}\n`)
  process.once('SIGTERM', () => {
    void Promise.all([bare.close(), memory.close(), redis.close()]).then(() => process.exit(0))
  })
}

if (process.argv[2] === '--serve') {
  void serve(process.argv[3], process.argv[4])
} else {
  main().catch((error: unknown) => {
    console.error(error)
    process.exitCode = 1
  })
}
