// Reading statsd and tracing settings: upstream's variables (USE_STATSD, TRACING_*…), Floodgate's
// flags, the OTLP exporter's standard variables, and what is refused with a reason.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { readSettings } from '../../src/service/settings.js'

const read = (env: Record<string, string>, args: string[] = []) => readSettings(['--config', 'rules.yaml', ...args], env)

describe('statsd settings', () => {
  it("USE_STATSD with upstream's defaults: localhost:8125 over TCP, tags in the name, every 10s", () => {
    assert.deepEqual(read({ USE_STATSD: 'true' }).statsd, {
      host: 'localhost',
      port: 8125,
      format: 'statsd',
      protocol: 'tcp',
      tags: [],
      intervalMs: 10_000,
      mogrifiers: [],
    })
  })

  it('USE_DOG_STATSD with STATSD_HOST/PORT, EXTRA_TAGS, STATS_FLUSH_INTERVAL: DogStatsD over UDP', () => {
    const statsd = read({
      USE_STATSD: 'false',
      USE_DOG_STATSD: 'true',
      STATSD_HOST: 'agent',
      STATSD_PORT: '9125',
      EXTRA_TAGS: 'a:1,b:2',
      STATS_FLUSH_INTERVAL: '5s',
    }).statsd
    assert.deepEqual(
      { ...statsd, mogrifiers: undefined },
      {
        host: 'agent',
        port: 9125,
        format: 'dogstatsd',
        protocol: 'udp',
        tags: [
          ['a', '1'],
          ['b', '2'],
        ],
        intervalMs: 5_000,
        mogrifiers: undefined,
      },
    )
  })

  it('is off unless asked for (upstream defaults USE_STATSD to true: a deliberate difference), and with DISABLE_STATS', () => {
    const off = read({ STATSD_HOST: 'agent', EXTRA_TAGS: 'a:b' })
    assert.equal(off.statsd, undefined)
    assert.deepEqual(off.upstreamNotes, [
      'STATSD_HOST is ignored without USE_STATSD=true or USE_DOG_STATSD=true: no statsd is sent (metrics are on GET /metrics)',
      'EXTRA_TAGS is ignored without USE_STATSD=true or USE_DOG_STATSD=true: no statsd is sent (metrics are on GET /metrics)',
    ])
    const disabled = read({ USE_STATSD: 'true', DISABLE_STATS: 'true', STATSD_PORT: '9125' })
    assert.equal(disabled.statsd, undefined)
    assert.ok(disabled.upstreamNotes.some((note) => note.startsWith('STATSD_PORT is ignored with DISABLE_STATS=true')))
  })

  it('refuses what cannot work, saying what to change', () => {
    assert.throws(() => read({}, ['--statsd', 'nohost']), /--statsd \/ FLOODGATE_STATSD: expected host:port/)
    assert.throws(() => read({}, ['--statsd-format', 'dogstatsd']), /need --statsd/)
    assert.throws(() => read({}, ['--statsd', 'h:1', '--statsd-mogrifier', 'X']), /--statsd-format dogstatsd/)
    assert.throws(() => read({ USE_DOG_STATSD: 'true', USE_DOG_STATSD_MOGRIFIERS: 'M' }), /mogrifier M: no pattern/)
    assert.throws(() => read({}, ['--statsd', 'h:1', '--statsd-tags', 'novalue']), /expected key:value/)
  })
})

describe('tracing settings', () => {
  it('TRACING_* as upstream: its default service name, protocol http as OTLP/HTTP protobuf, the rate', () => {
    assert.deepEqual(
      read({
        TRACING_ENABLED: 'true',
        TRACING_SERVICE_NAMESPACE: 'ns',
        TRACING_SERVICE_INSTANCE_ID: 'pod-1',
        TRACING_SAMPLING_RATE: '0.25',
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/',
      }).tracing,
      {
        protocol: 'http/protobuf',
        endpoint: 'http://collector:4318/v1/traces',
        serviceName: 'RateLimit',
        serviceNamespace: 'ns',
        serviceInstanceId: 'pod-1',
        samplingRate: 0.25,
      },
    )
  })

  it('TRACING_EXPORTER_PROTOCOL=grpc keeps OTEL_EXPORTER_OTLP_ENDPOINT as it is; off without TRACING_ENABLED', () => {
    const tracing = read({
      TRACING_ENABLED: 'true',
      TRACING_EXPORTER_PROTOCOL: 'grpc',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4317',
    }).tracing
    assert.equal(tracing?.protocol, 'grpc')
    assert.equal(tracing?.endpoint, 'http://c:4317')
    const off = read({ TRACING_SERVICE_NAME: 'x' })
    assert.equal(off.tracing, undefined)
    assert.deepEqual(off.upstreamNotes, ['TRACING_SERVICE_NAME is ignored without TRACING_ENABLED=true'])
  })

  it('refuses a bad protocol or rate', () => {
    assert.throws(() => read({ TRACING_ENABLED: 'true', TRACING_EXPORTER_PROTOCOL: 'zipkin' }), /expected http or grpc/)
    assert.throws(() => read({}, ['--tracing', '--tracing-sampling-rate', '2']), /fraction in \[0, 1\]/)
    assert.throws(() => read({ OTEL_EXPORTER_OTLP_PROTOCOL: 'thrift' }, ['--tracing']), /OTEL_EXPORTER_OTLP_PROTOCOL=thrift/)
  })
})

describe('loaded only when enabled', () => {
  it('no module of the service imports hot-shots or OpenTelemetry statically (only `import type` and dynamic import())', () => {
    const dir = new URL('../../src/service/', import.meta.url)
    const STATIC_IMPORT = /^import\s+(?!type\b)[^'"]*from\s+['"]([^'"]+)['"]/gm
    const offenders: string[] = []
    for (const file of readdirSync(dir).filter((name) => name.endsWith('.ts'))) {
      const source = readFileSync(new URL(file, dir), 'utf8')
      for (const [, name] of source.matchAll(STATIC_IMPORT))
        if (/^(hot-shots|@opentelemetry\/)/.test(name)) offenders.push(`${file}: ${name}`)
    }
    assert.deepEqual(offenders, [])
    assert.match(readFileSync(new URL('statsd.ts', dir), 'utf8'), /await import\('hot-shots'\)/)
  })
})
