// The gRPC protocol around the methods, through real sockets: unknown methods, non-gRPC requests, malformed
// and compressed messages, deadlines and cancelled calls, as grpc-js and raw HTTP/2 clients see them.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import http2 from 'node:http2'
import { gzipSync } from 'node:zlib'
import * as grpc from '@grpc/grpc-js'
import { Redis } from 'ioredis'
import { startRedis, type RedisProcess } from '../../../floodgate/test/support/redis-server.js'
import { encodeRequest } from '../conformance/support.js'
import { rlsClients, startTestService, type TestService } from './helpers.js'

const SHOULD_RATE_LIMIT = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit'

/** A message as gRPC frames it: the compressed flag, the big-endian length, the bytes. */
function frame(message: Uint8Array, compressed = false): Buffer {
  const out = Buffer.alloc(5 + message.length)
  out[0] = compressed ? 1 : 0
  out.writeUInt32BE(message.length, 1)
  out.set(message, 5)
  return out
}

interface RawAnswer {
  httpStatus: number
  grpcStatus: string | undefined
  grpcMessage: string | undefined
  body: Buffer
}

/** One call on a fresh HTTP/2 connection, headers and body as given; grpc-status from the trailers or a trailers-only head. */
function rawCall(port: number, headers: http2.OutgoingHttpHeaders, body: Buffer): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(`http://127.0.0.1:${port}`)
    session.on('error', reject)
    const stream = session.request({
      ':method': 'POST',
      ':path': SHOULD_RATE_LIMIT,
      'content-type': 'application/grpc',
      te: 'trailers',
      ...headers,
    })
    const answer: RawAnswer = { httpStatus: 0, grpcStatus: undefined, grpcMessage: undefined, body: Buffer.alloc(0) }
    const chunks: Buffer[] = []
    const read = (h: http2.IncomingHttpHeaders) => {
      if (h['grpc-status'] !== undefined) answer.grpcStatus = String(h['grpc-status'])
      if (h['grpc-message'] !== undefined) answer.grpcMessage = decodeURI(String(h['grpc-message']))
    }
    stream.on('response', (h) => {
      answer.httpStatus = Number(h[':status'])
      read(h)
    })
    stream.on('trailers', read)
    stream.on('data', (chunk: Buffer) => chunks.push(chunk))
    stream.on('error', reject)
    stream.on('close', () => {
      answer.body = Buffer.concat(chunks)
      session.close()
      resolve(answer)
    })
    stream.end(body)
  })
}

const request = (user: string) => encodeRequest({ domain: 'test', descriptors: [{ entries: { user } }] })

describe('gRPC protocol (memory store)', () => {
  let service: TestService
  let client: grpc.Client
  before(async () => {
    service = await startTestService()
    client = new grpc.Client(`127.0.0.1:${service.grpcPort}`, grpc.credentials.createInsecure())
  })
  after(async () => {
    client.close()
    await service.stop()
  })

  const unary = (path: string, bytes: Buffer, target = client) =>
    new Promise<Buffer>((resolve, reject) =>
      target.makeUnaryRequest(
        path,
        (b: Buffer) => b,
        (b: Buffer) => b,
        bytes,
        (error, response) => (error ? reject(error) : resolve(response as Buffer)),
      ),
    )

  it('answers UNIMPLEMENTED for a method it does not serve, health Watch included', async () => {
    for (const path of ['/envoy.service.ratelimit.v3.RateLimitService/Other', '/grpc.health.v1.Health/Watch', '/nothing']) {
      await assert.rejects(
        unary(path, Buffer.alloc(0)),
        (error: grpc.ServiceError) => error.code === grpc.status.UNIMPLEMENTED && error.details.includes(path),
      )
    }
  })

  it('answers a request that is not gRPC with HTTP 415, as grpc-js does', async () => {
    const answer = await rawCall(service.grpcPort, { 'content-type': 'application/json' }, Buffer.from('{}'))
    assert.equal(answer.httpStatus, 415)
  })

  it('answers INTERNAL for bytes that are not a RateLimitRequest, and keeps answering', async () => {
    await assert.rejects(
      unary(SHOULD_RATE_LIMIT, Buffer.from([0x0a, 0xff, 0xff, 0xff])),
      (error: grpc.ServiceError) => error.code === grpc.status.INTERNAL,
    )
    assert.ok((await unary(SHOULD_RATE_LIMIT, request('p1'))).length > 0)
  })

  it('decides a gzip-compressed request from a grpc-js client that compresses', async () => {
    const gzipClient = new grpc.Client(`127.0.0.1:${service.grpcPort}`, grpc.credentials.createInsecure(), {
      'grpc.default_compression_algorithm': 2,
    })
    try {
      const rls = rlsClients(service.grpcPort)
      // The same counter as an uncompressed call: 3 per day, the compressed call took one.
      await unary(SHOULD_RATE_LIMIT, request('p2'), gzipClient)
      assert.equal(
        (await rls.shouldRateLimit({ domain: 'test', descriptors: [{ entries: [{ key: 'user', value: 'p2' }] }] })).statuses[0]
          .limit_remaining,
        1,
      )
      rls.close()
    } finally {
      gzipClient.close()
    }
  })

  it('refuses a compressed message inflating past the cap (RESOURCE_EXHAUSTED), one in an unknown encoding (UNIMPLEMENTED)', async () => {
    // 1 MiB of one repeated byte compresses to about a kilobyte: small on the wire, too big once read.
    const bomb = gzipSync(Buffer.alloc(1 << 20, 0x0a))
    assert.ok(bomb.length < 64 * 1024)
    const tooBig = await rawCall(service.grpcPort, { 'grpc-encoding': 'gzip' }, frame(bomb, true))
    assert.equal(tooBig.grpcStatus, String(grpc.status.RESOURCE_EXHAUSTED))
    const unknown = await rawCall(service.grpcPort, { 'grpc-encoding': 'snappy' }, frame(request('p3'), true))
    assert.equal(unknown.grpcStatus, String(grpc.status.UNIMPLEMENTED))
    assert.match(unknown.grpcMessage ?? '', /unsupported encoding "snappy"/)
  })

  it('a unary call with no message or with two is UNIMPLEMENTED; a malformed grpc-timeout is INTERNAL', async () => {
    assert.equal((await rawCall(service.grpcPort, {}, Buffer.alloc(0))).grpcStatus, String(grpc.status.UNIMPLEMENTED))
    const two = Buffer.concat([frame(request('p4')), frame(request('p4'))])
    assert.equal((await rawCall(service.grpcPort, {}, two)).grpcStatus, String(grpc.status.UNIMPLEMENTED))
    const badTimeout = await rawCall(service.grpcPort, { 'grpc-timeout': 'soon' }, frame(request('p5')))
    assert.equal(badTimeout.grpcStatus, String(grpc.status.INTERNAL))
    assert.match(badTimeout.grpcMessage ?? '', /Invalid grpc-timeout value "soon"/)
    const ok = await rawCall(service.grpcPort, { 'grpc-timeout': '10S' }, frame(request('p5')))
    assert.equal(ok.grpcStatus, '0')
    assert.ok(ok.body.length > 5)
  })
})

describe('gRPC deadlines and cancelled calls (Redis store)', () => {
  let redis: RedisProcess
  let service: TestService
  let admin: Redis
  before(async () => {
    redis = await startRedis()
    // The store may take longer than any call's deadline here: the call's own grpc-timeout must end it.
    service = await startTestService(undefined, ['--redis', redis.url, '--store-timeout', '1h'])
    admin = new Redis(redis.port, redis.host, { maxRetriesPerRequest: 0 })
  })
  after(async () => {
    admin.disconnect()
    await service.stop()
    await redis.stop()
  })

  it('ends a call whose grpc-timeout passes before the store answers (DEADLINE_EXCEEDED), one the client cancels quietly', async () => {
    const rls = rlsClients(service.grpcPort)
    try {
      // Connected and answering before the pause.
      assert.equal(
        (await rls.shouldRateLimit({ domain: 'test', descriptors: [{ entries: [{ key: 'user', value: 'd0' }] }] })).overall_code,
        'OK',
      )
      // The server holds every command for 5 s: far past the 200 ms deadline however busy the machine is.
      await admin.call('CLIENT', 'PAUSE', '5000', 'ALL')
      const cancelled = http2.connect(`http://127.0.0.1:${service.grpcPort}`)
      cancelled.on('error', () => {})
      const stream = cancelled.request({
        ':method': 'POST',
        ':path': SHOULD_RATE_LIMIT,
        'content-type': 'application/grpc',
        te: 'trailers',
      })
      stream.on('error', () => {})
      stream.end(frame(request('d1')))
      const late = await rawCall(service.grpcPort, { 'grpc-timeout': '200m' }, frame(request('d2')))
      assert.equal(late.grpcStatus, String(grpc.status.DEADLINE_EXCEEDED))
      stream.close(http2.constants.NGHTTP2_CANCEL)
      cancelled.close()
      await admin.call('CLIENT', 'UNPAUSE')
      // Both late decisions find their calls over; the server answers the next one as usual.
      assert.equal(
        (await rls.shouldRateLimit({ domain: 'test', descriptors: [{ entries: [{ key: 'user', value: 'd3' }] }] })).overall_code,
        'OK',
      )
    } finally {
      rls.close()
    }
  })
})
