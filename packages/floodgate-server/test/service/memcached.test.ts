// The service on real memcached servers: --memcached and upstream's BACKEND_TYPE=memcache / MEMCACHE_HOST_PORT, and their errors.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { startMemcached, type MemcachedProcess } from '../../../floodgate/test/support/memcached-server.js'
import { readSettings } from '../../src/service/settings.js'
import { readUpstreamEnvironment } from '../../src/service/upstream-env.js'
import { checkBody, postJson, startTestService, type TestService } from './helpers.js'

describe('settings', () => {
  it('--memcached takes host:port,… and the prefix; refuses a second store and a prefix memcached cannot hold', () => {
    const settings = readSettings(['--config', 'r.yaml', '--memcached', '10.0.0.1:11211, 10.0.0.2:11212'], {})
    assert.deepEqual(settings.store, { kind: 'memcached', servers: ['10.0.0.1:11211', '10.0.0.2:11212'] })
    assert.throws(() => readSettings(['--config', 'r', '--memcached', 'a:1', '--redis', 'redis://b:2'], {}), /give only one of/)
    assert.throws(() => readSettings(['--config', 'r', '--memcached', 'nope'], {}), /expected host:port/)
    assert.throws(() => readSettings(['--config', 'r', '--memcached', 'a:1', '--redis-prefix', 'a|b'], {}), /redisPrefix|redis-prefix/)
  })

  it("upstream's BACKEND_TYPE=memcache with MEMCACHE_HOST_PORT selects the memcached store", () => {
    const env = { BACKEND_TYPE: 'memcache', MEMCACHE_HOST_PORT: 'm1:11211,m2:11211', REDIS_URL: 'ignored:6379' }
    const settings = readSettings(['r.yaml'], env)
    assert.deepEqual(settings.store, { kind: 'memcached', servers: ['m1:11211', 'm2:11211'] })
    const { notes } = readUpstreamEnvironment({ ...env, MEMCACHE_MAX_IDLE_CONNS: '4' })
    assert.ok(
      notes.some((note) => note.startsWith('REDIS_URL is ignored')),
      notes.join('\n'),
    )
    assert.ok(
      notes.some((note) => note.startsWith('MEMCACHE_MAX_IDLE_CONNS is accepted')),
      notes.join('\n'),
    )
  })

  it('refuses what it cannot do, saying why', () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{ BACKEND_TYPE: 'memcache' }, /BACKEND_TYPE=memcache: set MEMCACHE_HOST_PORT/],
      [{ BACKEND_TYPE: 'dynamo' }, /BACKEND_TYPE=dynamo: not supported by Floodgate: only redis and memcache/],
      [
        { BACKEND_TYPE: 'memcache', MEMCACHE_HOST_PORT: 'a:1', MEMCACHE_SRV: '_memcache._tcp.example.com' },
        /either --memcached .* or --memcache-srv/,
      ],
    ]
    for (const [env, message] of cases) assert.throws(() => readSettings(['r.yaml'], env), message)
  })
})

describe('service on memcached', () => {
  let servers: MemcachedProcess[]
  let service: TestService
  const serviceArgs = () => ['--memcached', servers.map((s) => s.address).join(','), '--redis-prefix', 'svc:', '--store-timeout', '5s']
  before(async () => {
    servers = await Promise.all([startMemcached(), startMemcached()])
    service = await startTestService(undefined, serviceArgs())
  })
  after(async () => {
    await service?.stop()
    await Promise.all((servers ?? []).map((server) => server.stop()))
  })

  it('limits upstream-format and Floodgate-format rules, over HTTP and /json', async () => {
    const statuses: number[] = []
    const alice = checkBody('test', [{ user: 'mc-alice' }])
    for (let i = 0; i < 5; i++) statuses.push((await postJson(`${service.httpUrl}/v1/check`, alice)).status)
    assert.deepEqual(statuses, [200, 200, 200, 429, 429])
    const burst = []
    for (let i = 0; i < 3; i++) burst.push((await postJson(`${service.httpUrl}/v1/check`, checkBody('test', [{ burst: 'mc-bob' }]))).status)
    assert.deepEqual(burst, [200, 200, 429])
    const request = { domain: 'test', descriptors: [{ entries: [{ key: 'user', value: 'mc-carol' }] }] }
    assert.equal((await postJson(`${service.httpUrl}/json`, request)).body.statuses[0].limitRemaining, 2)
  })

  it('a second instance on the same servers shares the counters', async () => {
    const other = await startTestService(undefined, serviceArgs())
    try {
      const body = checkBody('test', [{ user: 'mc-dave' }])
      const statuses = []
      for (const instance of [service, other, service, other]) statuses.push((await postJson(`${instance.httpUrl}/v1/check`, body)).status)
      assert.deepEqual(statuses, [200, 200, 200, 429])
    } finally {
      await other.stop()
    }
  })
})
