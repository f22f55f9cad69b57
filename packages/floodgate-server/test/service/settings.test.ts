// Settings of `floodgate serve`: flags, environment variables, defaults, and errors that name the option.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { readSettings } from '../../src/service/settings.js'
import { serveUsage } from '../../src/service/serve-help.js'
import { SERVE_OPTIONS } from '../../src/service/serve-options.js'
import type { FloodgateError } from 'floodgate'

describe('readSettings', () => {
  it('applies the documented defaults: embedded store, ports 8080/8081, fail open', () => {
    const settings = readSettings(['--config', 'rules.yaml'], {})
    assert.deepEqual(settings.store, { kind: 'memory' })
    assert.equal(settings.httpPort, 8080)
    assert.equal(settings.grpcPort, 8081)
    assert.equal(settings.host, '0.0.0.0')
    assert.equal(settings.onStoreError, 'open')
    assert.equal(settings.adminToken, undefined)
    assert.equal(settings.watch, true)
    assert.equal(settings.bodyLimitBytes, 65_536)
    // Adaptive by default: from 100ms while the store answers fast, up to 2s (issue 26 §3).
    assert.equal(settings.storeTimeoutMinMs, 100)
    assert.equal(settings.storeTimeoutMs, 2_000)
    assert.equal(settings.nearLimitRatio, 0.8)
  })

  it('reads every option from its environment variable, and a flag wins over it', () => {
    const env = {
      FLOODGATE_CONFIG: '/etc/floodgate',
      FLOODGATE_REDIS_URL: 'redis://cache:6379',
      FLOODGATE_HTTP_PORT: '9000',
      FLOODGATE_GRPC_PORT: '9001',
      FLOODGATE_ADMIN_TOKEN: 'secret-token',
      FLOODGATE_ON_STORE_ERROR: 'local',
      FLOODGATE_INSTANCES: '4',
      FLOODGATE_STORE_TIMEOUT: '250ms',
      FLOODGATE_LOG_LEVEL: 'warn',
      FLOODGATE_NO_WATCH: 'true',
      FLOODGATE_GRPC_RESPONSE_HEADERS: '1',
      FLOODGATE_SHUTDOWN_TIMEOUT: '3s',
    }
    const settings = readSettings([], env)
    assert.equal(settings.config, '/etc/floodgate')
    assert.deepEqual(settings.store, { kind: 'redis', url: 'redis://cache:6379' })
    assert.equal(settings.httpPort, 9000)
    assert.equal(settings.grpcPort, 9001)
    assert.equal(settings.adminToken, 'secret-token')
    assert.equal(settings.onStoreError, 'local')
    assert.equal(settings.instances, 4)
    assert.equal(settings.storeTimeoutMs, 250)
    assert.equal(settings.logLevel, 'warn')
    assert.equal(settings.watch, false)
    assert.equal(settings.grpcResponseHeaders, true)
    assert.equal(settings.shutdownTimeoutMs, 3000)
    assert.equal(readSettings(['--http-port', '7000'], env).httpPort, 7000)
    // Every option has both a flag and a variable.
    for (const option of Object.values(SERVE_OPTIONS)) {
      assert.match(option.env, /^FLOODGATE_[A-Z_]+$/)
      assert.ok(serveUsage().includes(`--${option.flag}`))
    }
  })

  it("takes a fixed --store-timeout, an adaptive one up to --store-timeout-max, and upstream's REDIS_TIMEOUT as that maximum", () => {
    const fixed = readSettings(['rules.yaml', '--store-timeout', '250ms'], {})
    assert.deepEqual([fixed.storeTimeoutMinMs, fixed.storeTimeoutMs], [250, 250])
    const capped = readSettings(['rules.yaml', '--store-timeout-max', '5s'], {})
    assert.deepEqual([capped.storeTimeoutMinMs, capped.storeTimeoutMs], [100, 5_000])
    const both = readSettings(['rules.yaml', '--store-timeout', '50ms', '--store-timeout-max', '2s'], {})
    assert.deepEqual([both.storeTimeoutMinMs, both.storeTimeoutMs], [50, 2_000])
    // envoyproxy/ratelimit's variable, in its own format, is honoured, no longer accepted and ignored.
    const upstream = readSettings(['rules.yaml'], { REDIS_SOCKET_TYPE: 'tcp', REDIS_URL: 'cache:6379', REDIS_TIMEOUT: '10s' })
    assert.deepEqual([upstream.storeTimeoutMinMs, upstream.storeTimeoutMs], [100, 10_000])
    assert.ok(!upstream.upstreamNotes.some((note) => note.startsWith('REDIS_TIMEOUT')))
    // A Floodgate variable wins over upstream's.
    const own = readSettings(['rules.yaml'], { REDIS_TIMEOUT: '10s', FLOODGATE_STORE_TIMEOUT_MAX: '3s' })
    assert.equal(own.storeTimeoutMs, 3_000)
    assert.throws(
      () => readSettings(['rules.yaml', '--store-timeout', '3s', '--store-timeout-max', '1s'], {}),
      /--store-timeout \/ FLOODGATE_STORE_TIMEOUT: .*no longer than --store-timeout-max/,
    )
  })

  it("reads upstream's LOG_FORMAT: json is JSON lines, anything else (text, its default) one text line per record", () => {
    assert.equal(readSettings(['rules.yaml'], { LOG_FORMAT: 'json' }).logFormat, 'json')
    assert.equal(readSettings(['rules.yaml'], { LOG_FORMAT: 'text' }).logFormat, 'pretty')
    assert.equal(readSettings(['rules.yaml'], {}).logFormat, undefined)
    assert.equal(readSettings(['rules.yaml'], { LOG_FORMAT: 'text', FLOODGATE_LOG_FORMAT: 'json' }).logFormat, 'json')
    assert.ok(!readSettings(['rules.yaml'], { LOG_FORMAT: 'json' }).upstreamNotes.some((note) => note.startsWith('LOG_FORMAT')))
  })

  it('reads Redis Cluster nodes and Sentinels', () => {
    assert.deepEqual(readSettings(['rules.yaml', '--redis-cluster', 'a:7000, b:7001'], {}).store, {
      kind: 'cluster',
      nodes: [
        { host: 'a', port: 7000 },
        { host: 'b', port: 7001 },
      ],
    })
    assert.deepEqual(
      readSettings(['rules.yaml'], { FLOODGATE_REDIS_SENTINELS: 's1:26379,[::1]:26380', FLOODGATE_REDIS_SENTINEL_NAME: 'main' }).store,
      {
        kind: 'sentinel',
        sentinels: [
          { host: 's1', port: 26379 },
          { host: '::1', port: 26380 },
        ],
        name: 'main',
      },
    )
  })

  it('explains what is wrong, naming the flag and the variable', () => {
    const cases: [string[], Record<string, string>, RegExp][] = [
      [[], {}, /^--config \/ FLOODGATE_CONFIG: required/],
      [['c', '--http-port', '70000'], {}, /^--http-port \/ FLOODGATE_HTTP_PORT: a port is at most 65535/],
      [['c'], { FLOODGATE_GRPC_PORT: 'x' }, /^--grpc-port \/ FLOODGATE_GRPC_PORT: expected a port number/],
      [['c', '--redis', 'localhost:6379'], {}, /^--redis \/ FLOODGATE_REDIS_URL: expected a redis:\/\//],
      [['c', '--redis', 'redis://a', '--redis-cluster', 'b:1'], {}, /give only one of/],
      [['c', '--redis-sentinel', 's:1'], {}, /^--sentinel-name .*required with --redis-sentinel/],
      [['c', '--redis-cluster', 'nohost'], {}, /expected host:port/],
      [['c', '--on-store-error', 'maybe'], {}, /^--on-store-error .*expected open, closed, local or error/],
      [['c', '--admin-token', 'short'], {}, /at least 8 characters/],
      [['c', '--store-timeout', 'soon'], {}, /^--store-timeout .*"soon" is not a duration/],
      [['c'], { FLOODGATE_NO_WATCH: 'perhaps' }, /^FLOODGATE_NO_WATCH: expected true or false/],
      [['c', '--wat'], {}, /^unknown option --wat \(floodgate serve --help lists them\)$/],
      [['a', 'b'], {}, /unexpected arguments b/],
    ]
    for (const [argv, env, message] of cases) {
      assert.throws(
        () => readSettings(argv, env),
        (error: FloodgateError) => {
          assert.equal(error.code, 'INVALID_OPTION')
          assert.match(error.message, message)
          return true
        },
        argv.join(' '),
      )
    }
  })
})
