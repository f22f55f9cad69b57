// The service on memcached servers found by SRV record (upstream's MEMCACHE_SRV, MEMCACHE_SRV_REFRESH): a DNS server in
// the test answers and changes the record, real memcached processes hold the counters, the store follows the record.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { startMemcached, type MemcachedProcess } from '../../../floodgate/test/support/memcached-server.js'
import { lookupServers, srvResolver } from '../../src/service/memcache-srv.js'
import { readSettings } from '../../src/service/settings.js'
import { checkBody, postJson, startTestService, type TestService } from './helpers.js'
import { startSrvDnsServer, type SrvDnsServer } from './srv-dns.js'

const NAME = '_memcache._tcp.floodgate.test'

describe('settings', () => {
  it('MEMCACHE_SRV and MEMCACHE_SRV_REFRESH (a Go duration) select the memcached store from an SRV record', () => {
    const env = { BACKEND_TYPE: 'memcache', MEMCACHE_SRV: NAME, MEMCACHE_SRV_REFRESH: '1m30s' }
    assert.deepEqual(readSettings(['r.yaml'], env).store, {
      kind: 'memcached',
      servers: [],
      srv: { name: NAME, refreshMs: 90_000, dnsServers: undefined },
    })
    // A refresh left in a manifest that lists the servers is ignored, as upstream ignores it.
    const listed = readSettings(['r.yaml'], { BACKEND_TYPE: 'memcache', MEMCACHE_HOST_PORT: 'm1:11211', MEMCACHE_SRV_REFRESH: '30s' })
    assert.deepEqual(listed.store, { kind: 'memcached', servers: ['m1:11211'] })
    assert.ok(listed.upstreamNotes.includes('MEMCACHE_SRV_REFRESH is ignored without MEMCACHE_SRV, as upstream ignores it'))
    // Upstream's default refresh, 0: looked up at start only.
    const flags = ['--config', 'r', '--memcache-srv', NAME, '--memcache-srv-refresh', '0', '--dns-server', '10.0.0.53, [::1]:5353']
    assert.deepEqual(readSettings(flags, {}).store, {
      kind: 'memcached',
      servers: [],
      srv: { name: NAME, refreshMs: 0, dnsServers: ['10.0.0.53', '[::1]:5353'] },
    })
  })

  it('refuses what does not go together, saying why', () => {
    const cases: [string[], Record<string, string>, RegExp][] = [
      [[], { BACKEND_TYPE: 'memcache', MEMCACHE_HOST_PORT: 'a:1', MEMCACHE_SRV: NAME }, /either --memcached .* or --memcache-srv/],
      [[], { BACKEND_TYPE: 'memcache' }, /set MEMCACHE_HOST_PORT .* or MEMCACHE_SRV/],
      [['--memcache-srv', 'memcache.example.org'], {}, /SRV record name like _memcache\._tcp/],
      [['--memcache-srv-refresh', '30s'], {}, /only applies with --memcache-srv/],
      [['--dns-server', '10.0.0.53'], {}, /only applies with --memcache-srv/],
      [['--memcache-srv', NAME, '--dns-server', 'dns.example:53'], {}, /expected ip or ip:port/],
      [['--memcache-srv', NAME, '--memcache-srv-refresh', 'soon'], {}, /memcache-srv-refresh/],
      [['--memcache-srv', NAME, '--redis', 'redis://r:6379'], {}, /give only one of/],
      [['--memcache-srv', NAME, '--memcache-tls-ca', 'ca.pem'], {}, /only applies with --memcache-tls/],
    ]
    for (const [args, env, message] of cases) {
      assert.throws(() => readSettings(['--config', 'r.yaml', ...args], env), message, `${args.join(' ')} ${JSON.stringify(env)}`)
    }
  })
})

describe('the lookup', () => {
  let dns: SrvDnsServer
  before(async () => {
    dns = await startSrvDnsServer()
  })
  after(async () => {
    await dns?.close()
  })

  it("lists target:port in upstream's order (Go sorts targets with their final dot) and each server once", async () => {
    dns.set(NAME, [
      { target: 'mc.b', port: 11211 },
      { target: 'mc.b.c', port: 11211 },
      { target: 'mc.a', port: 11212 },
      { target: 'mc.b', port: 11211 },
    ])
    // Sorted without the dot, mc.b.c:… would come before mc.b:… ('.' < ':'); upstream has mc.b.:… first.
    assert.deepEqual(await lookupServers(srvResolver([dns.address]), NAME), ['mc.a:11212', 'mc.b:11211', 'mc.b.c:11211'])
  })

  it('a record that is missing or failing stops the start, saying why', async () => {
    for (const [name, failing, message] of [
      ['_memcache._tcp.missing.test', false, /_memcache\._tcp\.missing\.test: the SRV lookup failed: .*ENOTFOUND/],
      [NAME, true, /the SRV lookup failed: .*ESERVFAIL/],
    ] as const) {
      dns.fail(failing)
      await assert.rejects(startTestService(undefined, ['--memcache-srv', name, '--dns-server', dns.address]), message)
    }
    dns.fail(false)
  })
})

describe('service on memcached servers from an SRV record', () => {
  let servers: MemcachedProcess[]
  let dns: SrvDnsServer
  let service: TestService
  const target = (server: MemcachedProcess) => ({ target: server.host, port: server.port })

  before(async () => {
    servers = await Promise.all([startMemcached(), startMemcached(), startMemcached()])
    dns = await startSrvDnsServer()
    dns.set(NAME, [target(servers[0]), target(servers[1])])
    const args = ['--memcache-srv', NAME, '--memcache-srv-refresh', '20ms', '--dns-server', dns.address, '--redis-prefix', 'srv:']
    service = await startTestService(undefined, [...args, '--store-timeout', '5s'])
  })
  after(async () => {
    await service?.stop()
    await dns?.close()
    await Promise.all((servers ?? []).map((server) => server.stop()))
  })

  const metric = async (line: RegExp): Promise<number> => {
    const { body } = await service.metrics.expose()
    const match = line.exec(body)
    return match === null ? 0 : Number(match[1])
  }
  const serverCount = () => metric(/^floodgate_memcache_servers (\d+)$/m)
  const refreshes = (result: string) => metric(new RegExp(`^floodgate_memcache_srv_refreshes_total\\{result="${result}"\\} (\\d+)$`, 'm'))
  const storeErrors = () => metric(/^floodgate_store_errors_total (\d+)$/m)
  /** Reads `read` until `done` holds, for at most 20 s: a bound on a hang, not a speed test. */
  const until = async (read: () => Promise<number>, done: (value: number) => boolean): Promise<number> => {
    const deadline = Date.now() + 20_000
    let value = await read()
    while (!done(value) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10))
      value = await read()
    }
    return value
  }
  const check = async (user: string) => (await postJson(`${service.httpUrl}/v1/check`, checkBody('test', [{ user }]))).status
  const users = Array.from({ length: 60 }, (_, i) => `srv-user-${i}`)

  it('starts on the servers the record lists; a third one added: kept keys count on, moved ones start afresh', async () => {
    assert.equal(await serverCount(), 2)
    // user: 3 a day. Two hits each on the first two servers.
    for (const user of users) assert.deepEqual([await check(user), await check(user)], [200, 200])
    dns.set(NAME, servers.map(target))
    // Decisions keep going while the store moves to three servers.
    const during: Promise<number>[] = []
    const count = await until(
      async () => {
        during.push(check(`srv-during-${during.length}`))
        return serverCount()
      },
      (n) => n === 3,
    )
    assert.equal(count, 3)
    assert.ok((await Promise.all(during)).every((status) => status === 200))
    // A key left on its server has one hit left; one moved to the new server has all three.
    const allowed = new Map<string, number>()
    for (const user of users) {
      let n = 0
      while (n < 4 && (await check(user)) === 200) n++
      allowed.set(user, n)
    }
    const moved = users.filter((user) => allowed.get(user) === 3)
    assert.ok(
      users.every((user) => allowed.get(user) === 1 || allowed.get(user) === 3),
      JSON.stringify(Object.fromEntries(allowed)),
    )
    // About a third moved (consistent hashing: the new server's share).
    assert.ok(moved.length >= 5 && moved.length <= 40, `${moved.length} of ${users.length} moved`)
    assert.equal(await storeErrors(), 0, 'no decision failed')
  })

  it('a lookup that fails or lists nothing keeps the servers, and is counted', async () => {
    dns.fail(true)
    const failed = await until(
      () => refreshes('failed'),
      (n) => n >= 2,
    )
    assert.ok(failed >= 2)
    dns.fail(false)
    dns.set(NAME, [])
    assert.ok(
      (await until(
        () => refreshes('empty'),
        (n) => n >= 2,
      )) >= 2,
    )
    assert.equal(await serverCount(), 3)
    // Every user has used its day: the counters are still where they were.
    assert.equal(await check(users[0]), 429)
    assert.equal(await storeErrors(), 0)
  })

  it('a server leaves the record: only its keys move, and start afresh on the others', async () => {
    dns.set(NAME, [target(servers[0]), target(servers[2])])
    assert.equal(await until(serverCount, (n) => n === 2), 2)
    assert.ok((await refreshes('changed')) >= 2)
    const statuses = await Promise.all(users.map((user) => check(user)))
    const fresh = statuses.filter((status) => status === 200).length
    // The removed server held about a third of the keys; every other key is still used up.
    assert.ok(fresh >= 5 && fresh <= 40, `${fresh} of ${users.length} started afresh`)
    assert.ok(statuses.every((status) => status === 200 || status === 429))
    assert.equal(await storeErrors(), 0)
  })
})
