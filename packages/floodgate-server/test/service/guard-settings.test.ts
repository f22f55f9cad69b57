// The edge options of `floodgate serve` (guard-settings.ts): defaults, flags and variables, upstream's variable, errors.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { FloodgateError } from 'floodgate'
import { readSettings } from '../../src/service/settings.js'
import { serveUsage } from '../../src/service/serve-help.js'

describe('guard settings', () => {
  it('default to production values', () => {
    const settings = readSettings(['--config', 'rules.yaml'], {})
    assert.equal(settings.healthCheckStore, false)
    assert.equal(settings.grpcMaxConnections, 10_000)
    assert.equal(settings.grpcIdleTimeoutMs, 5 * 60_000)
    assert.equal(settings.grpcHandshakeTimeoutMs, 10_000)
    assert.equal(settings.grpcKeepaliveMinTimeMs, 5 * 60_000)
    assert.equal(settings.grpcMaxConcurrentStreams, 100)
  })

  it('come from flags or environment variables, the flag winning, and are listed by --help', () => {
    const env = {
      FLOODGATE_HEALTH_CHECK_STORE: 'true',
      FLOODGATE_GRPC_MAX_CONNECTIONS: '500',
      FLOODGATE_GRPC_IDLE_TIMEOUT: '30s',
      FLOODGATE_GRPC_HANDSHAKE_TIMEOUT: '2000',
      FLOODGATE_GRPC_KEEPALIVE_MIN_TIME: '10s',
      FLOODGATE_GRPC_MAX_CONCURRENT_STREAMS: '50',
    }
    const settings = readSettings(['--config', 'r.yaml', '--grpc-max-connections', '42'], env)
    assert.equal(settings.healthCheckStore, true)
    assert.equal(settings.grpcMaxConnections, 42)
    assert.equal(settings.grpcIdleTimeoutMs, 30_000)
    assert.equal(settings.grpcHandshakeTimeoutMs, 2_000)
    assert.equal(settings.grpcKeepaliveMinTimeMs, 10_000)
    assert.equal(settings.grpcMaxConcurrentStreams, 50)
    for (const flag of [
      '--health-check-store',
      '--grpc-max-connections',
      '--grpc-idle-timeout',
      '--grpc-handshake-timeout',
      '--grpc-keepalive-min-time',
      '--grpc-max-concurrent-streams',
    ]) {
      assert.ok(serveUsage().includes(flag), flag)
    }
  })

  it("read upstream's REDIS_HEALTH_CHECK_ACTIVE_CONNECTION (Go's true/false spellings); a Floodgate variable wins", () => {
    const redis = { REDIS_URL: 'localhost:6379', REDIS_SOCKET_TYPE: 'tcp' }
    const read = (env: NodeJS.ProcessEnv) => readSettings(['--config', 'r.yaml'], { ...redis, ...env })
    assert.equal(read({ REDIS_HEALTH_CHECK_ACTIVE_CONNECTION: 'true' }).healthCheckStore, true)
    assert.equal(read({ REDIS_HEALTH_CHECK_ACTIVE_CONNECTION: 'T' }).healthCheckStore, true)
    assert.equal(read({ REDIS_HEALTH_CHECK_ACTIVE_CONNECTION: 'false' }).healthCheckStore, false)
    assert.equal(read({ REDIS_HEALTH_CHECK_ACTIVE_CONNECTION: 'true', FLOODGATE_HEALTH_CHECK_STORE: 'false' }).healthCheckStore, false)
    assert.ok(!read({ REDIS_HEALTH_CHECK_ACTIVE_CONNECTION: 'true' }).upstreamNotes.some((note) => note.includes('HEALTH_CHECK')))
  })

  it('refuse bad values, naming the flag and the variable', () => {
    const cases: [string[], RegExp][] = [
      [['--grpc-max-connections', '0'], /--grpc-max-connections \/ FLOODGATE_GRPC_MAX_CONNECTIONS: expected a whole number ≥ 1/],
      [['--grpc-idle-timeout', '0'], /--grpc-idle-timeout \/ FLOODGATE_GRPC_IDLE_TIMEOUT: must be greater than 0/],
      [['--grpc-handshake-timeout', 'soon'], /--grpc-handshake-timeout \/ FLOODGATE_GRPC_HANDSHAKE_TIMEOUT: /],
      [['--grpc-keepalive-min-time', '30d'], /--grpc-keepalive-min-time \/ FLOODGATE_GRPC_KEEPALIVE_MIN_TIME: at most 24d/],
      [['--grpc-max-concurrent-streams', '4294967296'], /--grpc-max-concurrent-streams \/ FLOODGATE_GRPC_MAX_CONCURRENT_STREAMS: at most/],
    ]
    for (const [args, message] of cases) {
      assert.throws(
        () => readSettings(['--config', 'r.yaml', ...args], {}),
        (error: unknown) => error instanceof FloodgateError && error.code === 'INVALID_OPTION' && message.test(error.message),
        args.join(' '),
      )
    }
  })
})
