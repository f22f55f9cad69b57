// Conformance with envoyproxy/ratelimit end to end: a deployment written for upstream (its environment
// variables: Redis, runtime directories, ports, auth, reload, what is refused) starts a service.

import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { pino } from 'pino'
import { startRedis } from '../../../floodgate/test/support/redis-server.js'
import { startService } from '../../src/service/server.js'
import { readSettings } from '../../src/service/settings.js'
import { desc, EnvoyClient, startConformance, storeReachable, unique } from './support.js'
import { RULES } from './basic-rules.js'

describe('conformance: a deployment written for envoyproxy/ratelimit (its environment variables)', () => {
  it('REDIS_URL, REDIS_SOCKET_TYPE, RUNTIME_ROOT/RUNTIME_SUBDIRECTORY, PORT, GRPC_PORT, HOST, USE_STATSD… start a service', async () => {
    const redis = await startRedis()
    const root = mkdtempSync(join(tmpdir(), 'floodgate-runtime-'))
    try {
      mkdirSync(join(root, 'ratelimit', 'config'), { recursive: true })
      writeFileSync(join(root, 'ratelimit', 'config', 'basic.yaml'), RULES)
      const settings = readSettings([], {
        REDIS_SOCKET_TYPE: 'tcp',
        REDIS_TYPE: 'single',
        REDIS_URL: `127.0.0.1:${redis.port}`,
        RUNTIME_ROOT: root,
        RUNTIME_SUBDIRECTORY: 'ratelimit',
        RUNTIME_WATCH_ROOT: 'false',
        PORT: '0',
        GRPC_PORT: '0',
        HOST: '127.0.0.1',
        GRPC_HOST: '127.0.0.1',
        USE_STATSD: 'false',
        LOG_LEVEL: 'WARN',
        LOCAL_CACHE_SIZE_IN_BYTES: '1048576',
        LIMIT_RESPONSE_HEADERS_ENABLED: 'true',
        STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: 'false',
        // Floodgate's own variable beside them: a deadline no busy test machine reaches.
        FLOODGATE_STORE_TIMEOUT: '10s',
      })
      assert.deepEqual(settings.store, { kind: 'redis', url: `redis://127.0.0.1:${redis.port}` })
      assert.equal(settings.config, join(root, 'ratelimit', 'config'))
      assert.equal(settings.logLevel, 'warn')
      assert.ok(settings.upstreamNotes.some((note) => note.startsWith('LOCAL_CACHE_SIZE_IN_BYTES is accepted and ignored')))
      const service = await startService(settings, { logger: pino({ level: 'silent' }) })
      const client = new EnvoyClient(service.grpcPort)
      try {
        // /readyz says `ready` once the store answers; the public body has no storeReachable field, and
        // polling for one waited out all 200 attempts whether or not Redis was reached.
        await storeReachable(service.httpUrl)
        const response = await client.shouldRateLimit({ domain: 'basic', descriptors: [desc({ key3: unique('env') })] })
        assert.equal(response.statuses[0].limit_remaining, 9)
        assert.deepEqual(
          response.response_headers_to_add.map((h) => h.key),
          ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'],
        )
      } finally {
        client.close()
        await service.close()
      }
    } finally {
      rmSync(root, { recursive: true, force: true })
      await redis.stop()
    }
  })

  it('testBasicConfigAuth: REDIS_AUTH reaches a Redis that requires a password', async () => {
    const redis = await startRedis(['--requirepass', 'secret pass'])
    const dir = mkdtempSync(join(tmpdir(), 'floodgate-auth-'))
    try {
      writeFileSync(join(dir, 'rules.yaml'), RULES)
      const settings = readSettings(['--config', dir], {
        REDIS_SOCKET_TYPE: 'tcp',
        REDIS_URL: `127.0.0.1:${redis.port}`,
        REDIS_AUTH: 'secret pass',
        HOST: '127.0.0.1',
        PORT: '0',
        GRPC_PORT: '0',
        FLOODGATE_STORE_TIMEOUT: '10s',
      })
      const service = await startService(settings, { logger: pino({ level: 'silent' }) })
      const client = new EnvoyClient(service.grpcPort)
      try {
        await storeReachable(service.httpUrl)
        assert.equal(
          (await client.shouldRateLimit({ domain: 'basic', descriptors: [desc({ key3: unique('auth') })] })).statuses[0].limit_remaining,
          9,
        )
      } finally {
        client.close()
        await service.close()
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
      await redis.stop()
    }
  })

  it('testBasicConfigReload: a changed rules file applies to the next request', async () => {
    const c = await startConformance('memory', RULES)
    try {
      const value = unique('reload')
      assert.equal(
        (await c.client.shouldRateLimit({ domain: 'basic', descriptors: [desc({ key3: value })] })).statuses[0].limit_remaining,
        9,
      )
      writeFileSync(c.service.rulesFile, RULES.replace('requests_per_unit: 10 }', 'requests_per_unit: 12 }'))
      assert.equal(c.service.reloadRules(), true)
      const after = await c.client.shouldRateLimit({ domain: 'basic', descriptors: [desc({ key3: value })] })
      assert.deepEqual(
        [after.statuses[0].current_limit?.requests_per_unit, after.statuses[0].limit_remaining],
        [12, 10],
        'the same counter, the new limit',
      )
    } finally {
      await c.stop()
    }
  })

  it('settings Floodgate cannot honour are refused with the reason', () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{ BACKEND_TYPE: 'memcache' }, /BACKEND_TYPE=memcache: set MEMCACHE_HOST_PORT/],
      [{ REDIS_URL: 'cache:6379' }, /REDIS_URL=cache:6379 with REDIS_SOCKET_TYPE=unix \(upstream's default\): expected a socket path/],
      [{ CONFIG_TYPE: 'GRPC_XDS_DELTA' }, /CONFIG_TYPE=GRPC_XDS_DELTA: .*GRPC_XDS_SOTW/],
      [{ REDIS_PERSECOND: 'true', REDIS_PERSECOND_URL: 'c:6380' }, /REDIS_PERSECOND_URL=c:6380 with REDIS_PERSECOND_SOCKET_TYPE=unix/],
      [{ HOST: '0.0.0.0', GRPC_HOST: '127.0.0.1' }, /one address/],
    ]
    for (const [env, message] of cases) assert.throws(() => readSettings(['rules.yaml'], env), message)
  })

  // REDIS_AUTH with a Cluster or Sentinels, and REDIS_SENTINEL_AUTH: redis-auth.test.ts, on real servers.
  it('REDIS_TYPE sentinel and cluster, REDIS_AUTH and REDIS_TLS map onto the store settings', () => {
    const base = { REDIS_SOCKET_TYPE: 'tcp' }
    assert.deepEqual(readSettings(['r'], { ...base, REDIS_URL: 'h:6379', REDIS_AUTH: 'p@ss', REDIS_TLS: 'true' }).store, {
      kind: 'redis',
      url: 'rediss://:p%40ss@h:6379',
    })
    assert.deepEqual(readSettings(['r'], { ...base, REDIS_TYPE: 'cluster', REDIS_URL: 'a:7000,b:7001' }).store, {
      kind: 'cluster',
      nodes: [
        { host: 'a', port: 7000 },
        { host: 'b', port: 7001 },
      ],
    })
    assert.deepEqual(readSettings(['r'], { ...base, REDIS_TYPE: 'SENTINEL', REDIS_URL: 'main,s1:26379,s2:26379' }).store, {
      kind: 'sentinel',
      name: 'main',
      sentinels: [
        { host: 's1', port: 26379 },
        { host: 's2', port: 26379 },
      ],
    })
  })
})
