// Slow and greedy clients through real sockets: a trickled body or head gets 408 and the socket closes;
// past --max-connections a new client sheds the socket idle longest (a request in flight is never cut).

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

  /** A socket with a request in flight: its head is in (the server said 100 Continue), its body not yet sent. */
  async function midRequest() {
    const raw = await rawSocket(service.httpPort)
    raw.socket.write(
      'POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n' +
        `Expect: 100-continue\r\nContent-Length: ${BODY.length}\r\n\r\n`,
    )
    while (!raw.received().includes('100 Continue')) await new Promise((resolve) => raw.socket.once('data', resolve))
    return raw
  }
  const BODY = JSON.stringify({ domain: 'test', descriptors: [[{ key: 'user', value: 'cap' }]] })

  it('past --max-connections a new client sheds the idle socket, never one with a request in flight', { timeout: 60_000 }, async () => {
    // The oldest socket is mid-request; the idle one came after it.
    const busy = await midRequest()
    const idle = await rawSocket(service.httpPort)
    const response = fetch(`${service.httpUrl}/healthz`)
    assert.equal(await idle.closed, '', 'the idle socket is shed for the newcomer')
    assert.equal((await response).status, 200, 'the newcomer is served')
    busy.socket.write(BODY)
    assert.match(await busy.closed, /HTTP\/1\.1 200 [\s\S]*"allowed":true/, 'the request in flight is answered')
  })

  it('with no socket idle, the newcomer is the one closed', { timeout: 60_000 }, async () => {
    const busy = [await midRequest(), await midRequest()]
    const refused = await rawSocket(service.httpPort)
    assert.equal(await refused.closed, '', 'the newcomer is closed unanswered')
    for (const { socket, closed } of busy) {
      socket.write(BODY)
      assert.match(await closed, /HTTP\/1\.1 200 /)
    }
  })
})
