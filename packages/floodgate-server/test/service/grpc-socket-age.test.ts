// gRPC on a unix socket (upstream's GRPC_UDS) and the connections' age (GRPC_MAX_CONNECTION_AGE/_GRACE):
// GOAWAY after the age with ±10% jitter, running calls finish within the grace, then the connection is cut.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import http2 from 'node:http2'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as grpc from '@grpc/grpc-js'
import { limitConnectionAge } from '../../src/service/grpc-connection-age.js'
import { loadRlsPackage } from '../../src/service/grpc-server.js'
import type { ShutdownTimers } from '../../src/service/shutdown.js'
import { readUpstreamEnvironment } from '../../src/service/upstream-env.js'
import { startTestService, type TestService } from './helpers.js'

/** Timers that only record: the test fires them by hand, in the order they were set. */
function manualTimers() {
  const pending: { callback: () => void; ms: number; cleared: boolean }[] = []
  const timers: ShutdownTimers = {
    setTimeout: (callback, ms) => {
      const timer = { callback, ms, cleared: false }
      pending.push(timer)
      return timer
    },
    clearTimeout: (handle) => {
      if (handle) (handle as { cleared: boolean }).cleared = true
    },
  }
  return { timers, pending }
}

/** An empty grpc.health.v1.HealthCheckRequest, framed (no compression, length 0). */
const EMPTY_MESSAGE = Buffer.alloc(5)

function openHealthCall(session: http2.ClientHttp2Session) {
  const stream = session.request({
    ':method': 'POST',
    ':path': '/grpc.health.v1.Health/Check',
    'content-type': 'application/grpc',
    te: 'trailers',
  })
  const status = new Promise<string | undefined>((resolve) => {
    let grpcStatus: string | undefined
    stream.on('response', (headers) => (grpcStatus ??= headers['grpc-status'] as string | undefined))
    stream.on('trailers', (trailers) => (grpcStatus = trailers['grpc-status'] as string | undefined))
    stream.on('error', () => {})
    stream.resume()
    stream.on('close', () => resolve(grpcStatus))
  })
  return { stream, status }
}

describe('gRPC on a unix socket', () => {
  let dir: string
  let service: TestService
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fg-uds-'))
    service = await startTestService(undefined, ['--grpc-socket', join(dir, 'rls.sock')])
  })
  after(async () => {
    await service.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  it('answers a grpc-js client dialling unix:<path>, and reports that address', async () => {
    assert.equal(service.grpcAddress, `unix:${join(dir, 'rls.sock')}`)
    const pkg = loadRlsPackage() as any
    const client = new pkg.envoy.service.ratelimit.v3.RateLimitService(service.grpcAddress, grpc.credentials.createInsecure())
    try {
      const answer = await new Promise<any>((resolve, reject) =>
        client.ShouldRateLimit(
          { domain: 'test', descriptors: [{ entries: [{ key: 'user', value: 'uds' }] }] },
          (error: Error | null, a: any) => (error ? reject(error) : resolve(a)),
        ),
      )
      assert.equal(answer.overall_code, 'OK')
      assert.equal(answer.statuses[0].limit_remaining, 2)
    } finally {
      client.close()
    }
  })

  it('GRPC_UDS maps to --grpc-socket', () => {
    assert.equal(readUpstreamEnvironment({ GRPC_UDS: '/run/rls.sock' }).env.FLOODGATE_GRPC_SOCKET, '/run/rls.sock')
  })
})

describe('gRPC connection age', () => {
  it('sends GOAWAY at the age, lets a call in flight finish, then the connection ends', async () => {
    const { timers, pending } = manualTimers()
    const service = await startTestService(undefined, ['--grpc-max-connection-age', '1h', '--grpc-max-connection-age-grace', '10m'], {
      connectionAgeTimers: timers,
    })
    const session = http2.connect(`http://127.0.0.1:${service.grpcPort}`)
    session.on('error', () => {})
    try {
      const running = openHealthCall(session)
      // The call is in flight (headers sent, no message yet) when the age comes.
      await new Promise((resolve) => running.stream.once('ready', resolve))
      // A PING's answer comes after the server has read the call's HEADERS (frames are in order).
      await new Promise((resolve) => session.ping(resolve))
      await waitFor(() => pending.length === 1)
      assert.ok(pending[0].ms >= 0.9 * 3_600_000 && pending[0].ms <= 1.1 * 3_600_000, `age with jitter: ${pending[0].ms}`)
      const goaway = new Promise((resolve) => session.once('goaway', resolve))
      pending[0].callback()
      await goaway
      running.stream.end(EMPTY_MESSAGE)
      assert.equal(await running.status, '0', 'the running call finishes after the GOAWAY')
      await new Promise((resolve) => (session.closed ? resolve(undefined) : session.once('close', resolve)))
      // The grace timer is cleared: the server's session ended on its own once its call was done.
      await waitFor(() => pending[1]?.cleared === true)
    } finally {
      session.destroy()
      await service.stop()
    }
  })

  it('cuts the connection when its running call outlasts the grace', async () => {
    const { timers, pending } = manualTimers()
    const service = await startTestService(undefined, [], { connectionAgeTimers: timers })
    const session = http2.connect(`http://127.0.0.1:${service.grpcPort}`)
    session.on('error', () => {})
    try {
      const stuck = openHealthCall(session)
      await new Promise((resolve) => stuck.stream.once('ready', resolve))
      await new Promise((resolve) => session.ping(resolve))
      await waitFor(() => pending.length === 1)
      const goaway = new Promise((resolve) => session.once('goaway', resolve))
      pending[0].callback()
      await goaway
      assert.equal(pending.length, 2, 'the grace started')
      assert.equal(pending[1].ms, 3_600_000, 'default grace 1h, as upstream')
      const closed = new Promise((resolve) => session.once('close', resolve))
      pending[1].callback()
      await closed
      assert.notEqual(await stuck.status, '0')
    } finally {
      session.destroy()
      await service.stop()
    }
  })

  it('jitters the age by ±10%', async () => {
    for (const [random, expected] of [
      [0, 900],
      [0.5, 1_000],
      [0.999_999, 1_100],
    ] as const) {
      const { timers, pending } = manualTimers()
      const server = http2.createServer()
      limitConnectionAge(server, { maxAgeMs: 1_000, graceMs: 10, timers, random: () => random })
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
      const session = http2.connect(`http://127.0.0.1:${(server.address() as { port: number }).port}`)
      await waitFor(() => pending.length === 1)
      assert.ok(Math.abs(pending[0].ms - expected) < 0.01, `random ${random}: ${pending[0].ms}`)
      session.destroy()
      await new Promise((resolve) => server.close(resolve))
    }
  })

  it('reads upstream Go durations for GRPC_MAX_CONNECTION_AGE and _GRACE', () => {
    const { env } = readUpstreamEnvironment({ GRPC_MAX_CONNECTION_AGE: '1h30m', GRPC_MAX_CONNECTION_AGE_GRACE: '90s' })
    assert.equal(env.FLOODGATE_GRPC_MAX_CONNECTION_AGE, String(90 * 60_000))
    assert.equal(env.FLOODGATE_GRPC_MAX_CONNECTION_AGE_GRACE, '90000')
  })
})

/** Polls a condition the server reaches on its own events (a session made, a timer set). */
async function waitFor(condition: () => boolean): Promise<void> {
  for (let attempt = 0; attempt < 500; attempt++) {
    if (condition()) return
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  assert.fail('the condition never held')
}
