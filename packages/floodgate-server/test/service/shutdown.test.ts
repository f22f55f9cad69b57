// Graceful shutdown through real sockets: kept-alive and never-used connections do not hold it, work in
// flight is answered (Connection: close), and the deadline, a timer the test fires, cuts the rest.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { Agent, request } from 'node:http'
import * as http2 from 'node:http2'
import type { ShutdownTimers } from '../../src/service/shutdown.js'
import { rawSocket, rlsClients, startTestService, type TestService } from './helpers.js'

/** Timers that fire only when the test says so: the shutdown deadline never passes by itself. */
function manualTimers() {
  const pending = new Map<number, () => void>()
  let next = 0
  const timers: ShutdownTimers = {
    setTimeout: (callback) => {
      pending.set(++next, callback)
      return next
    },
    clearTimeout: (handle) => void pending.delete(handle as number),
  }
  return {
    timers,
    get pending() {
      return pending.size
    },
    fireAll() {
      const callbacks = [...pending.values()]
      pending.clear()
      for (const callback of callbacks) callback()
    },
  }
}

const BODY = JSON.stringify({ domain: 'test', descriptors: [[{ key: 'user', value: 'draining' }]] })
// With Expect: 100-continue, Node answers "100 Continue" as it hands the request to the app: the
// test then knows the request is in flight on the server, with no clock.
const HEAD =
  'POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nExpect: 100-continue\r\n' +
  `Content-Length: ${BODY.length}\r\n\r\n`

/** Resolves once `probe` holds, re-checking on every turn of the event loop (no clock involved). */
async function until(probe: () => boolean): Promise<void> {
  while (!probe()) await new Promise((resolve) => setImmediate(resolve))
}

/** A raw gRPC call on `session`, its errors ignored and its answer read: the test writes the message. */
function openCall(session: http2.ClientHttp2Session, path: string): http2.ClientHttp2Stream {
  const stream = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers' })
  stream.on('error', () => {})
  stream.resume()
  return stream
}

async function started(clock: ReturnType<typeof manualTimers>): Promise<TestService> {
  // A deadline far off: only the manual timers could end the drain early, and they are not fired.
  return startTestService(undefined, ['--shutdown-timeout', '1h'], { timers: clock.timers })
}

describe('graceful shutdown', () => {
  it('does not wait for kept-alive or never-used connections, HTTP or gRPC', { timeout: 60_000 }, async () => {
    const clock = manualTimers()
    const service = await started(clock)
    // As Envoy and every pool: a connection opened ahead of need, one kept alive after a request,
    // and a gRPC channel that has made a call.
    const preconnected = await rawSocket(service.httpPort)
    const agent = new Agent({ keepAlive: true })
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(
        `${service.httpUrl}/v1/check`,
        { method: 'POST', agent, headers: { 'content-type': 'application/json' } },
        (res) => {
          res.resume()
          res.on('end', () => resolve(res.statusCode ?? 0))
        },
      )
      req.on('error', reject)
      req.end(BODY)
    })
    assert.equal(status, 200)
    const grpc = rlsClients(service.grpcPort)
    assert.equal(
      (await grpc.shouldRateLimit({ domain: 'test', descriptors: [{ entries: [{ key: 'user', value: 'g' }] }] })).overall_code,
      'OK',
    )

    await service.stop()
    assert.equal(await preconnected.closed, '', 'the unused connection was closed without an answer')
    assert.equal(clock.pending, 0, 'the deadline was cleared, not reached')
    agent.destroy()
    grpc.close()
  })

  it('answers the request in flight with Connection: close, then finishes without the deadline', { timeout: 60_000 }, async () => {
    const clock = manualTimers()
    const service = await started(clock)
    const { socket, received, closed } = await rawSocket(service.httpPort)
    socket.write(HEAD + BODY.slice(0, 10))
    await until(() => received().startsWith('HTTP/1.1 100 Continue'))
    let stopped = false
    const stopping = service.stop().then(() => (stopped = true))
    await until(() => clock.pending > 0)
    socket.write(BODY.slice(10))
    const answer = await closed
    assert.match(answer, /\r\n\r\nHTTP\/1\.1 200 /)
    assert.match(answer, /\r\nconnection: close\r\n/i)
    assert.match(answer, /"allowed":true/)
    await stopping
    assert.ok(stopped)
    assert.equal(clock.pending, 0, 'the deadline was cleared, not reached')
  })

  it('at the deadline cuts what is still open: a stalled HTTP body, a stalled gRPC call, a connection without the HTTP/2 preface', {
    timeout: 60_000,
  }, async () => {
    const clock = manualTimers()
    const service = await started(clock)
    const stalled = await rawSocket(service.httpPort)
    stalled.socket.write(HEAD + BODY.slice(0, 10))
    await until(() => stalled.received().startsWith('HTTP/1.1 100 Continue'))
    const noPreface = await rawSocket(service.grpcPort)
    const session = http2.connect(`http://127.0.0.1:${service.grpcPort}`)
    session.on('error', () => {})
    const stream = openCall(session, '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit')
    stream.write(Buffer.from([0, 0, 0, 0, 10]))
    await new Promise((resolve) => stream.once('response', resolve).once('close', resolve).once('ready', resolve))

    let stopped = false
    const stopping = service.stop().then(() => (stopped = true))
    await until(() => clock.pending >= 2)
    // Let the drain run: nothing in flight can finish, so the shutdown keeps waiting.
    for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve))
    assert.equal(stopped, false, 'still waiting for the work in flight')
    clock.fireAll()
    await stopping
    assert.equal(await stalled.closed, 'HTTP/1.1 100 Continue\r\n\r\n', 'cut without an answer')
    noPreface.socket.destroy()
    session.destroy()
  })

  it('answers a gRPC call in flight: its connection is not cut with the ones that never sent a call', {
    timeout: 60_000,
  }, async () => {
    const clock = manualTimers()
    const service = await started(clock)
    const session = http2.connect(`http://127.0.0.1:${service.grpcPort}`)
    session.on('error', () => {})
    const stream = openCall(session, '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit')
    const trailers = new Promise<http2.IncomingHttpHeaders | undefined>((resolve) => {
      stream.once('trailers', resolve)
      // An error status comes trailers-only: in the response headers.
      stream.once('response', (headers) => headers['grpc-status'] !== undefined && resolve(headers))
      stream.once('close', () => resolve(undefined))
    })
    // Half of an empty message's 5-byte prefix: the call is open on the server, and cannot finish yet.
    stream.write(Buffer.from([0, 0]))
    // A whole call on the same connection, after it: once it is answered the server has the first one
    // too (HTTP/2 frames arrive in order on one connection).
    const probe = openCall(session, '/grpc.health.v1.Health/Check')
    probe.end(Buffer.alloc(5))
    await new Promise((resolve) => probe.once('trailers', resolve))
    const stopping = service.stop()
    await until(() => clock.pending >= 2)
    stream.end(Buffer.from([0, 0, 0]))
    const answered = await trailers
    assert.ok(answered?.['grpc-status'] !== undefined, 'the call in flight got its status, not a cut connection')
    await stopping
    session.destroy()
  })
})
