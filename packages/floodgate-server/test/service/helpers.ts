// Test helpers for the service: start it on free loopback ports with a rules file in a temp dir, and call it.

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as grpc from '@grpc/grpc-js'
import { pino } from 'pino'
import { startService, type RunningService, type StartOptions } from '../../src/service/server.js'
import { readSettings } from '../../src/service/settings.js'
import { loadRlsPackage } from '../../src/service/grpc-server.js'

/** Rules most service tests use: limits far from window edges (hour/day), plus the special cases. */
export const TEST_RULES = `
domain: test
descriptors:
  - key: user
    rate_limit: { unit: day, requests_per_unit: 3 }
  - key: vip
    rate_limit: { unlimited: true }
  - key: trial
    shadow_mode: true
    rate_limit: { name: trial, unit: day, requests_per_unit: 1 }
  - key: burst
    limits:
      - { name: burst, algorithm: token-bucket, limit: 2, period: 10s }
  - key: fast
    limits:
      # A rolling second: an epoch-aligned one could restart between two calls of a test.
      - { name: fast, algorithm: sliding-log, limit: 1, period: 1s }
`

export interface TestService extends RunningService {
  /** The temp dir holding `rules.yaml`. */
  readonly dir: string
  readonly rulesFile: string
  /** Closes the service and removes the temp dir. */
  stop(): Promise<void>
}

/** Starts the service on 127.0.0.1 with free ports, `rules` in a temp file and a silent logger; `options` as startService takes them. */
export async function startTestService(rules = TEST_RULES, extraArgs: string[] = [], options: StartOptions = {}): Promise<TestService> {
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-service-'))
  const rulesFile = join(dir, 'rules.yaml')
  writeFileSync(rulesFile, rules)
  const settings = readSettings(['--config', rulesFile, '--host', '127.0.0.1', '--http-port', '0', '--grpc-port', '0', ...extraArgs], {})
  const service = await startService(settings, { logger: pino({ level: 'silent' }), ...options })
  return {
    ...service,
    dir,
    rulesFile,
    async stop() {
      await service.close()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

/** POSTs JSON and returns status, headers and the parsed body. */
export async function postJson(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; body: any }> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  })
  const text = await response.text()
  return { status: response.status, headers: response.headers, body: text ? safeJson(text) : undefined }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

/** One descriptor of `/v1/check` from `key=value` pairs. */
export function checkBody(domain: string, pairs: Record<string, string>[], hits?: number) {
  return {
    domain,
    descriptors: pairs.map((pair) => Object.entries(pair).map(([key, value]) => ({ key, value }))),
    ...(hits === undefined ? {} : { hits }),
  }
}

/** A gRPC client of the RLS and health services, built from the service's own protos at runtime. */
export function rlsClients(port: number) {
  const pkg = loadRlsPackage() as any
  const address = `127.0.0.1:${port}`
  const rls = new pkg.envoy.service.ratelimit.v3.RateLimitService(address, grpc.credentials.createInsecure())
  const health = new pkg.grpc.health.v1.Health(address, grpc.credentials.createInsecure())
  const call = <T>(client: any, method: string, request: unknown): Promise<T> =>
    new Promise((resolve, reject) =>
      client[method](request, (error: Error | null, response: T) => (error ? reject(error) : resolve(response))),
    )
  return {
    shouldRateLimit: (request: unknown) => call<any>(rls, 'ShouldRateLimit', request),
    healthCheck: (service = '') => call<any>(health, 'Check', { service }),
    close() {
      rls.close()
      health.close()
    },
  }
}

/** Parses Prometheus text into `name{labels}` → value. */
export function parseMetrics(text: string): Map<string, number> {
  const values = new Map<string, number>()
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue
    const match = /^([a-zA-Z_:][\w:]*(?:\{[^}]*\})?)\s+(\S+)$/.exec(line)
    if (match) values.set(match[1], Number(match[2]))
  }
  return values
}

/** Scrapes `/metrics` of a running service. */
export async function scrape(httpUrl: string): Promise<Map<string, number>> {
  const response = await fetch(`${httpUrl}/metrics`)
  return parseMetrics(await response.text())
}

/** A raw TCP connection, what it received so far, and a promise of everything until the server closed it. */
export async function rawSocket(port: number): Promise<{ socket: Socket; received: () => string; closed: Promise<string> }> {
  const socket = connect(port, '127.0.0.1')
  let received = ''
  socket.setEncoding('utf8')
  socket.on('data', (chunk: string) => (received += chunk))
  socket.on('error', () => {})
  const closed = new Promise<string>((resolve) => socket.on('close', () => resolve(received)))
  await new Promise((resolve) => socket.once('connect', resolve))
  return { socket, received: () => received, closed }
}
