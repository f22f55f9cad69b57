// Slow and greedy clients through real sockets: a trickled body or head gets 408 and the socket closes;
// past --max-connections new connections are refused while the open ones keep working.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import type { Socket } from 'node:net'
import { postJson, rawSocket, rlsClients, startTestService, type TestService } from './helpers.js'

/** Writes one byte of `text` per timer tick until the socket closes (a slowloris client). */
function trickle(socket: Socket, text: string): void {
  let at = 0
  const timer = setInterval(() => {
    if (socket.destroyed || at >= text.length) return clearInterval(timer)
    socket.write(text[at++])
  }, 50)
  socket.once('close', () => clearInterval(timer))
}

describe('slow clients', () => {
  let service: TestService
  // Node times requests out on its own real clock. Two seconds leaves a prompt request room on a
  // busy machine (at 300 ms one was refused under load); the trickled ones take minutes to arrive.
  before(async () => {
    service = await startTestService(undefined, ['--request-timeout', '2s'])
  })
  after(async () => {
    await service.stop()
  })

  it('a body trickled slower than the request timeout gets 408 with a reason, and the socket closes', { timeout: 60_000 }, async () => {
    const body = JSON.stringify({ domain: 'test', descriptors: [[{ key: 'user', value: 'slow' }]] }).padEnd(10_000, ' ')
    const { socket, closed } = await rawSocket(service.httpPort)
    socket.write(`POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`)
    trickle(socket, body)
    const answer = await closed
    assert.match(answer, /^HTTP\/1\.1 408 Request Timeout\r\n/)
    assert.match(answer, /"error":"request_timeout","message":"the request did not arrive within 2s/)
  })

  it('so does a trickled request head', { timeout: 60_000 }, async () => {
    const { socket, closed } = await rawSocket(service.httpPort)
    trickle(socket, `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Padding: ${'p'.repeat(5_000)}\r\n\r\n`)
    assert.match(await closed, /^HTTP\/1\.1 408 /)
  })

  it('a prompt request on the same server is unaffected', async () => {
    assert.equal(
      (await postJson(`${service.httpUrl}/v1/check`, { domain: 'test', descriptors: [[{ key: 'user', value: 'quick' }]] })).status,
      200,
    )
  })

  it('a gRPC message over the body limit fails with RESOURCE_EXHAUSTED; one under it is decided', async () => {
    const grpc = rlsClients(service.grpcPort)
    try {
      const request = (value: string) => ({ domain: 'test', descriptors: [{ entries: [{ key: 'user', value }] }] })
      await assert.rejects(grpc.shouldRateLimit(request('x'.repeat(70_000))), (error: { code?: number }) => error.code === 8)
      assert.equal((await grpc.shouldRateLimit(request('y'.repeat(60_000)))).overall_code, 'OK')
    } finally {
      grpc.close()
    }
  })
})

describe('connection cap', () => {
  let service: TestService
  before(async () => {
    service = await startTestService(undefined, ['--max-connections', '2'])
  })
  after(async () => {
    await service.stop()
  })

  it('refuses connections past --max-connections and serves the open ones', { timeout: 60_000 }, async () => {
    const first = await rawSocket(service.httpPort)
    const second = await rawSocket(service.httpPort)
    const third = await rawSocket(service.httpPort)
    assert.equal(await third.closed, '', 'the third connection is closed without an answer')
    first.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
    assert.match(await first.closed, /^HTTP\/1\.1 200 [\s\S]*"status":"alive"/)
    second.socket.destroy()
    await second.closed
    // With the others gone there is room again (the server counts a socket until its close reaches it).
    let status = 0
    while (status !== 200) {
      const again = await rawSocket(service.httpPort)
      again.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
      status = Number(/^HTTP\/1\.1 (\d+)/.exec(await again.closed)?.[1] ?? 0)
    }
  })
})
