// The client SDK against a running service and against dead or silent ports: check, fail-open, timeouts.
// withRetry on its own: retry.test.ts.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { createServer, type Server } from 'node:http'
import { FloodgateClient, type FloodgateClientError, withRetry } from 'floodgate/client'
import type { CheckResult } from 'floodgate/client'
import { freePort } from '../../../floodgate/test/support/redis-server.js'
import { startTestService, type TestService } from '../service/helpers.js'

function listen(handler: Parameters<typeof createServer>[1]): Promise<{ server: Server; url: string }> {
  const server = createServer(handler)
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve({ server, url: `http://127.0.0.1:${(server.address() as { port: number }).port}` })),
  )
}

describe('FloodgateClient against the service', () => {
  let service: TestService
  before(async () => {
    service = await startTestService()
  })
  after(async () => {
    await service.stop()
  })

  it('returns the service answer, also when limited (no throw on 429)', async () => {
    const client = new FloodgateClient({ url: service.httpUrl, timeout: '2s' })
    const request = { domain: 'test', descriptors: [[{ key: 'user', value: 'sdk' }]] }
    for (let i = 0; i < 3; i++) {
      const result = await client.check(request)
      assert.equal(result.allowed, true)
      assert.equal(result.error, undefined)
    }
    const limited = await client.check(request)
    assert.equal(limited.allowed, false)
    assert.ok(limited.retryAfterMs > 0)
    assert.equal(limited.results[0].allowed, false)
  })

  it('throws FloodgateClientError with the reason when the service calls the request malformed', async () => {
    const client = new FloodgateClient({ url: service.httpUrl, timeout: '2s' })
    await assert.rejects(client.check({ domain: '', descriptors: [[{ key: 'user', value: 'x' }]] }), (error: FloodgateClientError) => {
      assert.equal(error.status, 400)
      assert.match(error.message, /domain: must not be empty/)
      return true
    })
  })

  it('withRetry waits at least Retry-After before calling again, then succeeds', async () => {
    const client = new FloodgateClient({ url: service.httpUrl, timeout: '2s' })
    const request = { domain: 'test', descriptors: [[{ key: 'fast', value: 'retry' }]] }
    assert.equal((await client.check(request)).allowed, true)
    const answers: { at: number; result: CheckResult }[] = []
    const result = await withRetry(
      async () => {
        const answer = await client.check(request)
        answers.push({ at: Date.now(), result: answer })
        return answer
      },
      { retries: 5, baseMs: 10, maxMs: 50 },
    )
    assert.equal(result.allowed, true)
    assert.ok(answers.length >= 2)
    const denied = answers[0]
    assert.equal(denied.result.allowed, false)
    assert.ok(answers[1].at - denied.at >= denied.result.retryAfterMs, 'the retry came no earlier than Retry-After')
  })
})

describe('FloodgateClient failure modes', () => {
  const request = { domain: 'test', descriptors: [[{ key: 'user', value: 'x' }]] }

  it('fails open on a dead port, with error set; fails closed when failOpen is false', async () => {
    const url = `http://127.0.0.1:${await freePort()}`
    const open = await new FloodgateClient({ url, timeout: '1s' }).check(request)
    assert.equal(open.allowed, true)
    assert.match(open.error ?? '', /ECONNREFUSED/)
    const closed = await new FloodgateClient({ url, timeout: '1s', failOpen: false }).check(request)
    assert.equal(closed.allowed, false)
    assert.ok(closed.error)
  })

  it('gives up after the timeout when the service does not answer', async () => {
    const { server, url } = await listen(() => {
      // never answers
    })
    try {
      const result = await new FloodgateClient({ url, timeout: 50 }).check(request)
      assert.equal(result.allowed, true)
      assert.equal(result.error, 'no answer within 50ms')
    } finally {
      server.closeAllConnections()
      server.close()
    }
  })

  it('treats a 5xx as the service being unavailable', async () => {
    const { server, url } = await listen((_req, res) => res.writeHead(503).end('{"message":"draining"}'))
    try {
      const result = await new FloodgateClient({ url, timeout: '1s', failOpen: false }).check(request)
      assert.equal(result.allowed, false)
      assert.match(result.error ?? '', /503: draining/)
    } finally {
      server.close()
    }
  })

  it('rejects bad options with a message that says what to pass', () => {
    assert.throws(() => new FloodgateClient({ url: 'localhost:8080' }), /url: expected/)
    assert.throws(() => new FloodgateClient({ url: 'http://x', timeout: '1 fortnight' as never }), /timeout: expected/)
  })
})
