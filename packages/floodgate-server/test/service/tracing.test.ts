// OpenTelemetry tracing of ShouldRateLimit (gRPC and /json) and /v1/check against an in-process OTLP receiver:
// the span continues the caller's trace (traceparent), a store span hangs under it, and sampling rate 0
// exports nothing new.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as grpc from '@grpc/grpc-js'
import { pino } from 'pino'
import { startRedis, type RedisProcess } from '../../../floodgate/test/support/redis-server.js'
import { loadRlsPackage } from '../../src/service/grpc-server.js'
import { startService, type RunningService } from '../../src/service/server.js'
import { readSettings } from '../../src/service/settings.js'
import { postJson } from './helpers.js'
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from './otlp-receiver.js'

const RULES = `
domain: edge
descriptors:
  - key: user
    rate_limit: { unit: day, requests_per_unit: 100 }
`

let dir: string
let redis: RedisProcess
let receiver: OtlpReceiver
before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'floodgate-tracing-'))
  writeFileSync(join(dir, 'rules.yaml'), RULES)
  redis = await startRedis()
})
after(async () => {
  await redis.stop()
  rmSync(dir, { recursive: true, force: true })
})

function start(env: Record<string, string>, serveHttp = false): Promise<RunningService> {
  const args = ['--config', join(dir, 'rules.yaml'), '--host', '127.0.0.1', '--http-port', '0', '--grpc-port', '0']
  if (!serveHttp) args.push('--no-http')
  return startService(readSettings(args, { REDIS_SOCKET_TYPE: 'tcp', REDIS_URL: `127.0.0.1:${redis.port}`, ...env }), {
    logger: pino({ level: 'silent' }),
  })
}

/** One ShouldRateLimit call over grpc-js, with `traceparent` in its metadata when given (or other trace headers). */
async function shouldRateLimit(port: number, user: string, traceparent?: string | Record<string, string>): Promise<string> {
  const pkg = loadRlsPackage() as any
  const client = new pkg.envoy.service.ratelimit.v3.RateLimitService(`127.0.0.1:${port}`, grpc.credentials.createInsecure())
  const metadata = new grpc.Metadata()
  const headers = typeof traceparent === 'string' ? { traceparent } : (traceparent ?? {})
  for (const [name, value] of Object.entries(headers)) metadata.set(name, value)
  try {
    const response: any = await new Promise((resolve, reject) =>
      client.ShouldRateLimit(
        { domain: 'edge', descriptors: [{ entries: [{ key: 'user', value: user }] }] },
        metadata,
        (error: Error | null, answer: unknown) => (error ? reject(error) : resolve(answer)),
      ),
    )
    return response.overall_code
  } finally {
    client.close()
  }
}

/** A W3C traceparent of a new sampled trace, as Envoy sends it: its trace id and the parent span's id. */
function envoyTrace() {
  const traceId = randomBytes(16).toString('hex')
  const spanId = randomBytes(8).toString('hex')
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` }
}

describe('tracing (TRACING_ENABLED)', () => {
  before(async () => {
    receiver = await startOtlpReceiver()
  })
  after(() => receiver.close())

  it("continues Envoy's trace: ShouldRateLimit under the traceparent's span, a store span under it (OTLP/HTTP protobuf)", async () => {
    const service = await start({
      TRACING_ENABLED: 'true',
      TRACING_SERVICE_NAME: 'ratelimit-test',
      TRACING_SERVICE_NAMESPACE: 'edge',
      TRACING_SERVICE_INSTANCE_ID: 'pod-1',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: receiver.url,
    })
    const envoy = envoyTrace()
    try {
      assert.equal(await shouldRateLimit(service.grpcPort, 'alice', envoy.traceparent), 'OK')
    } finally {
      // Spans are batched; shutdown exports what is buffered before it resolves.
      await service.close()
    }
    assert.ok(receiver.contentTypes.length > 0 && receiver.contentTypes.every((type) => type === 'application/x-protobuf'))
    const trace = receiver.spans.filter((span) => span.traceId === envoy.traceId)
    const call = trace.find((span) => span.name === 'ShouldRateLimit Execution')
    assert.ok(call, `a ShouldRateLimit span in Envoy's trace; received ${JSON.stringify(receiver.spans)}`)
    assert.equal(call.parentSpanId, envoy.spanId, "its parent is the span of Envoy's traceparent")
    assert.equal(call.kind, 2, 'SPAN_KIND_SERVER (OTLP numbering)')
    assert.equal(call.attributes.domain, 'edge')
    assert.deepEqual(
      { name: call.resource['service.name'], namespace: call.resource['service.namespace'], id: call.resource['service.instance.id'] },
      { name: 'ratelimit-test', namespace: 'edge', id: 'pod-1' },
    )
    const store = trace.filter((span) => span.parentSpanId === call.spanId)
    assert.equal(store.length, 1, 'one store call, under the ShouldRateLimit span')
    assert.equal(store[0].name, 'store redis')
    assert.equal(store[0].attributes.cost, 1)
    assert.equal(trace.length, 2, 'nothing else in the trace')
  })

  it('sampling rate 0: new traces are not exported; a sampled traceparent from Envoy still is (OTLP/HTTP JSON)', async () => {
    const before = receiver.spans.length
    const service = await start({
      TRACING_ENABLED: 'true',
      TRACING_SAMPLING_RATE: '0',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
    })
    const envoy = envoyTrace()
    try {
      for (let i = 0; i < 5; i++) assert.equal(await shouldRateLimit(service.grpcPort, `root-${i}`), 'OK')
      assert.equal(await shouldRateLimit(service.grpcPort, 'sampled', envoy.traceparent), 'OK')
    } finally {
      await service.close()
    }
    const exported = receiver.spans.slice(before)
    assert.deepEqual(
      exported.map((span) => [span.traceId, span.name]).sort(),
      [
        [envoy.traceId, 'ShouldRateLimit Execution'],
        [envoy.traceId, 'store redis'],
      ],
      'only the trace Envoy sampled',
    )
    assert.equal(exported[0].resource['service.name'], 'RateLimit', "upstream's default service name")
  })

  it("continues a B3 trace too (Envoy's Zipkin tracer), as upstream's propagators do", async () => {
    const before = receiver.spans.length
    const service = await start({ TRACING_ENABLED: 'true', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: receiver.url })
    const envoy = envoyTrace()
    try {
      const b3 = { 'x-b3-traceid': envoy.traceId, 'x-b3-spanid': envoy.spanId, 'x-b3-sampled': '1' }
      assert.equal(await shouldRateLimit(service.grpcPort, 'b3', b3), 'OK')
    } finally {
      await service.close()
    }
    const call = receiver.spans.slice(before).find((span) => span.name === 'ShouldRateLimit Execution')
    assert.ok(call)
    assert.deepEqual([call.traceId, call.parentSpanId], [envoy.traceId, envoy.spanId])
  })

  describe('the HTTP decision routes', () => {
    let service: RunningService
    let first: number
    // One service for the three requests: its spans are exported when it closes, and each case reads its own trace.
    const traces = { json: envoyTrace(), check: envoyTrace(), bad: envoyTrace() }
    const codes: Record<string, number> = {}
    const received = (traceId: string): ReceivedSpan[] => receiver.spans.slice(first).filter((span) => span.traceId === traceId)

    before(async () => {
      first = receiver.spans.length
      service = await start({ TRACING_ENABLED: 'true', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: receiver.url }, true)
      try {
        const request = { domain: 'edge', descriptors: [{ entries: [{ key: 'user', value: 'over-http' }] }] }
        codes.json = (await postJson(`${service.httpUrl}/json`, request, { traceparent: traces.json.traceparent })).status
        const check = { domain: 'edge', descriptors: [[{ key: 'user', value: 'checked' }]] }
        codes.check = (await postJson(`${service.httpUrl}/v1/check`, check, { traceparent: traces.check.traceparent })).status
        codes.bad = (
          await postJson(`${service.httpUrl}/json`, { domain: 'edge', descriptors: 'none' }, { traceparent: traces.bad.traceparent })
        ).status
      } finally {
        await service.close()
      }
    })

    it('answers /json, /v1/check and an unreadable /json (each with a traceparent header) as without tracing', () => {
      assert.deepEqual(codes, { json: 200, check: 200, bad: 400 })
    })

    it("/json: a ShouldRateLimit span under the caller's traceparent, a store span under it", () => {
      const trace = received(traces.json.traceId)
      const call = trace.find((span) => span.name === 'ShouldRateLimit Execution')
      assert.ok(call, `a ShouldRateLimit span in the caller's trace; received ${JSON.stringify(receiver.spans.slice(first))}`)
      assert.equal(call.parentSpanId, traces.json.spanId)
      assert.equal(call.kind, 2, 'SPAN_KIND_SERVER (OTLP numbering)')
      assert.deepEqual(call.attributes, { domain: 'edge', 'http.request.method': 'POST', 'http.route': '/json' })
      const store = trace.filter((span) => span.parentSpanId === call.spanId)
      assert.deepEqual(
        store.map((span) => [span.name, span.attributes.cost]),
        [['store redis', 1]],
        'one store call, under the /json span',
      )
      assert.equal(trace.length, 2, 'nothing else in the trace')
    })

    it('/v1/check: a POST /v1/check span, a store span under it', () => {
      const trace = received(traces.check.traceId)
      const call = trace.find((span) => span.name === 'POST /v1/check')
      assert.ok(call, `a /v1/check span in the caller's trace; received ${JSON.stringify(receiver.spans.slice(first))}`)
      assert.equal(call.parentSpanId, traces.check.spanId)
      assert.deepEqual(call.attributes, { domain: 'edge', 'http.request.method': 'POST', 'http.route': '/v1/check' })
      assert.deepEqual(
        trace.filter((span) => span.parentSpanId === call.spanId).map((span) => span.name),
        ['store redis'],
      )
      assert.equal(trace.length, 2, 'nothing else in the trace')
    })

    it('an unreadable /json body: its span ends failed, and nothing reached the store', () => {
      const trace = received(traces.bad.traceId)
      assert.deepEqual(
        trace.map((span) => [span.name, span.statusCode]),
        [['ShouldRateLimit Execution', 2]],
        'one span, with status ERROR (2)',
      )
    })
  })
})
