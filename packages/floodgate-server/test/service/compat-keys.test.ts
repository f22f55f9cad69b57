// --compat-keys envoy: Floodgate counts upstream-format rules under envoyproxy/ratelimit's keys, interleaved with
// raw commands shaped as upstream sends them, on a real Redis (with a per-second Redis) and real memcached servers.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { connect } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { crc32 } from 'node:zlib'
import fc from 'fast-check'
import { Redis } from 'ioredis'
import { storeKeyOf } from 'floodgate/rules'
import { startRedis, type RedisProcess } from '../../../floodgate/test/support/redis-server.js'
import { startMemcached, type MemcachedProcess } from '../../../floodgate/test/support/memcached-server.js'
import { parseStoreKey, upstreamCacheKey } from '../../src/service/compat-keys.js'
import { readSettings } from '../../src/service/settings.js'
import { postJson, startTestService, type TestService } from './helpers.js'

const RULES = `
domain: mig
descriptors:
  - key: user
    rate_limit: { unit: day, requests_per_unit: 5 }
  - key: ip
    rate_limit: { unit: second, requests_per_unit: 1000 }
  - key: team
    rate_limit: { unit: day, requests_per_unit: 100 }
  - key: own
    limits:
      - { name: own, algorithm: token-bucket, limit: 2, period: 1h }
`

/** Upstream's window start of a day limit now, in Unix seconds (src/limiter/cache_key.go: now / divider * divider). */
function dayStart(): number {
  const now = Math.floor(Date.now() / 1000)
  return Math.floor(now / 86_400) * 86_400
}

// The tests compute upstream's day window from this machine's clock while the service computes it
// from its own, so across midnight UTC the two could differ. Each group starts clear of the day's
// end (a group takes well under this margin, even on a busy machine), waiting for the next day when
// too close to it. The service keeps the real clock: a frozen one never lets its store breaker, opened
// by a call made while Redis was still connecting, close again.
const DAY_END_MARGIN_S = 300

/** Resolves once the UTC day has at least DAY_END_MARGIN_S left (waits past midnight when it has not). */
async function clearOfDayEnd(): Promise<void> {
  const left = dayStart() + 86_400 - Date.now() / 1000
  if (left < DAY_END_MARGIN_S) await sleep(left * 1000 + 1000)
}

/** One /json decision of Floodgate for `<key>=<value>`: [overall code, limit remaining], or ['ERROR', 0]. */
async function floodgate(service: TestService, key: string, value: string): Promise<[string, number]> {
  const { body } = await postJson(`${service.httpUrl}/json`, { domain: 'mig', descriptors: [{ entries: [{ key, value }] }] })
  // An error answer (the store not reached yet) has no statuses.
  return [body.overallCode ?? 'ERROR', body.statuses?.[0]?.limitRemaining ?? 0]
}

describe('the key layout', () => {
  it("is upstream's: prefix, domain, key_value_ per entry, window start (its own test's expectations)", () => {
    // envoyproxy/ratelimit test/limiter/base_limiter_test.go: TestGenerateCacheKeys, TestGenerateCacheKeysPrefix.
    assert.equal(upstreamCacheKey('', 'domain', [{ key: 'key', value: 'value' }], 1234), 'domain_key_value_1234')
    assert.equal(upstreamCacheKey('prefix:', 'domain', [{ key: 'key', value: 'value' }], 1234), 'prefix:domain_key_value_1234')
    assert.equal(
      upstreamCacheKey(
        '',
        'd',
        [
          { key: 'a', value: '1' },
          { key: 'b', value: '' },
        ],
        60,
      ),
      'd_a_1_b__60',
    )
  })

  it("recovers the domain and entries from any rule's store key that is not hashed", () => {
    const text = fc.string({ unit: fc.constantFrom('a', 'b', '|', '=', '\\', '_', ' ', 'é'), maxLength: 12 })
    fc.assert(
      fc.property(
        text,
        fc.array(
          fc.tuple(text, text).map(([key, value]) => ({ key, value })),
          { maxLength: 4 },
        ),
        (domain, entries) => {
          const storeKey = storeKeyOf(domain, entries)
          if (storeKey.startsWith('sha256:')) assert.equal(parseStoreKey(storeKey), undefined)
          else assert.deepEqual(parseStoreKey(storeKey), { domain, entries })
        },
      ),
    )
  })

  it('compat settings need a shared store; the per-second Redis needs compat mode', () => {
    assert.throws(() => readSettings(['--config', 'r', '--compat-keys', 'envoy'], {}), /needs its store/)
    const perSecondAlone = ['--config', 'r', '--redis', 'redis://a:1', '--redis-per-second', 'redis://b:2']
    assert.throws(() => readSettings(perSecondAlone, {}), /add --compat-keys envoy/)
    assert.throws(() => readSettings(['--config', 'r', '--redis', 'redis://a:1', '--compat-keys', 'lyft'], {}), /expected envoy/)
    const upstream = readSettings(['r'], {
      REDIS_SOCKET_TYPE: 'tcp',
      REDIS_URL: 'main:6379',
      REDIS_PERSECOND: 'true',
      REDIS_PERSECOND_SOCKET_TYPE: 'tcp',
      REDIS_PERSECOND_URL: 'fast:6379',
      CACHE_KEY_PREFIX: 'edge_',
      FLOODGATE_COMPAT_KEYS: 'envoy',
    })
    assert.deepEqual([upstream.compatKeys, upstream.compatPrefix, upstream.redisPerSecondUrl], ['envoy', 'edge_', 'redis://fast:6379'])
  })
})

describe('on Redis, with a per-second Redis', () => {
  let main: RedisProcess
  let perSecond: RedisProcess
  let service: TestService
  let mainClient: Redis
  let perSecondClient: Redis

  before(async () => {
    await clearOfDayEnd()
    ;[main, perSecond] = await Promise.all([startRedis(), startRedis()])
    service = await startTestService(RULES, [
      ...['--redis', main.url, '--compat-keys', 'envoy', '--compat-prefix', 'edge_'],
      ...['--redis-per-second', perSecond.url, '--store-timeout', '5s'],
    ])
    mainClient = new Redis(main.url)
    perSecondClient = new Redis(perSecond.url)
    // The counters' clients do not queue commands while connecting: wait until a decision reaches Redis.
    const deadline = Date.now() + 10_000
    const counted = async () =>
      (await mainClient.get(upstreamCacheKey('edge_', 'mig', [{ key: 'user', value: 'warm-up' }], dayStart()))) !== null
    while ((await floodgate(service, 'user', 'warm-up'))[0] !== 'OK' || !(await counted())) {
      if (Date.now() > deadline) throw new Error('the service never counted in Redis')
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  })

  after(async () => {
    mainClient?.disconnect()
    perSecondClient?.disconnect()
    await service?.stop()
    await Promise.all([main?.stop(), perSecond?.stop()])
  })

  it('Floodgate and upstream-shaped INCRBY + EXPIRE pipelines count in one key and enforce one limit', async () => {
    const key = upstreamCacheKey('edge_', 'mig', [{ key: 'user', value: 'alice' }], dayStart())
    // As upstream's fixed_cache_impl.go sends it: one pipeline of INCRBY and EXPIRE (the unit's seconds).
    const upstream = async (): Promise<number> => {
      const replies = await mainClient.pipeline().incrby(key, 1).expire(key, 86_400).exec()
      return Number(replies![0][1])
    }
    assert.deepEqual(await floodgate(service, 'user', 'alice'), ['OK', 4])
    assert.equal(await upstream(), 2)
    assert.deepEqual(await floodgate(service, 'user', 'alice'), ['OK', 2])
    assert.equal(await upstream(), 4)
    assert.deepEqual(await floodgate(service, 'user', 'alice'), ['OK', 0])
    // Upstream's own instance now sees 6 > 5: over the limit, as Floodgate does next.
    assert.equal(await upstream(), 6)
    assert.deepEqual(await floodgate(service, 'user', 'alice'), ['OVER_LIMIT', 0])
    assert.equal(await mainClient.get(key), '7')
    const ttl = await mainClient.ttl(key)
    // The unit's seconds plus upstream's default jitter of 0..299 (compat-expiry.test.ts).
    assert.ok(ttl > 0 && ttl < 86_400 + 300, `ttl ${ttl}`)
  })

  it('per-second counters go to the per-second Redis only, under the same layout', async () => {
    // The per-second Redis has a client of its own, which may still be connecting: an error answer counts nothing.
    const deadline = Date.now() + 10_000
    while ((await floodgate(service, 'ip', '10.1.2.3'))[0] !== 'OK') {
      if (Date.now() > deadline) assert.fail('the per-second Redis never answered')
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    const keys = await perSecondClient.keys('edge_mig_ip_10.1.2.3_*')
    assert.equal(keys.length, 1, `per-second keys: ${keys.join(', ')}`)
    assert.match(keys[0], /^edge_mig_ip_10\.1\.2\.3_\d{10}$/)
    assert.equal(await perSecondClient.get(keys[0]), '1')
    assert.deepEqual(await mainClient.keys('edge_mig_ip_*'), [])
  })

  it('with STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT, reads the shared counters first and charges only the one going over', async () => {
    const flags = ['--compat-keys', 'envoy', '--compat-prefix', 'edge_', '--stop-increment-when-over-limit']
    const other = await startTestService(RULES, ['--redis', main.url, ...flags])
    try {
      const user = upstreamCacheKey('edge_', 'mig', [{ key: 'user', value: 'erin' }], dayStart())
      const team = upstreamCacheKey('edge_', 'mig', [{ key: 'team', value: 'blue' }], dayStart())
      // Upstream's instances already used erin's whole day.
      await mainClient.pipeline().incrby(user, 5).expire(user, 86_400).exec()
      const descriptors = [{ entries: [{ key: 'user', value: 'erin' }] }, { entries: [{ key: 'team', value: 'blue' }] }]
      const deadline = Date.now() + 10_000
      let body
      do body = (await postJson(`${other.httpUrl}/json`, { domain: 'mig', descriptors })).body
      while (body.statuses?.[0]?.code !== 'OVER_LIMIT' && Date.now() < deadline)
      assert.equal(body.overallCode, 'OVER_LIMIT')
      assert.equal(await mainClient.get(user), '6')
      assert.equal(await mainClient.get(team), null, 'the team counter was read, not charged')
    } finally {
      await other.stop()
    }
  })

  it("Floodgate's own limits: rules keep Floodgate's layout", async () => {
    const statuses = []
    for (let i = 0; i < 3; i++) statuses.push((await floodgate(service, 'own', 'carol'))[0])
    assert.deepEqual(statuses, ['OK', 'OK', 'OVER_LIMIT'])
    assert.equal((await mainClient.keys('fg:*carol*')).length, 1)
    assert.deepEqual(await mainClient.keys('edge_mig_own_*'), [])
  })
})

describe('on memcached servers', () => {
  let servers: MemcachedProcess[]
  let service: TestService

  before(async () => {
    await clearOfDayEnd()
    servers = await Promise.all([startMemcached(), startMemcached()])
    const addresses = servers.map((s) => s.address).join(',')
    service = await startTestService(RULES, ['--memcached', addresses, '--compat-keys', 'envoy', '--store-timeout', '5s'])
  })

  after(async () => {
    await service?.stop()
    await Promise.all((servers ?? []).map((server) => server.stop()))
  })

  it("Floodgate and upstream's incr / add (text protocol, gomemcache's server choice) count in one key", async () => {
    const key = upstreamCacheKey('', 'mig', [{ key: 'user', value: 'bob' }], dayStart())
    // gomemcache's ServerList.PickServer: CRC-32 (IEEE) of the key modulo the number of servers, in list order.
    const home = servers[crc32(key) % servers.length]
    const away = servers[1 - servers.indexOf(home)]
    // As upstream's memcached/cache_impl.go increaseAsync: incr; on a miss, add with the unit's seconds; if not stored, incr.
    const upstream = async (): Promise<number> => {
      const incr = await textCommand(home.port, `incr ${key} 1\r\n`)
      if (incr !== 'NOT_FOUND') return Number(incr)
      const add = await textCommand(home.port, `add ${key} 0 86400 1\r\n1\r\n`)
      if (add === 'STORED') return 1
      return Number(await textCommand(home.port, `incr ${key} 1\r\n`))
    }
    assert.equal(await upstream(), 1)
    assert.deepEqual(await floodgate(service, 'user', 'bob'), ['OK', 3])
    assert.equal(await upstream(), 3)
    assert.deepEqual(await floodgate(service, 'user', 'bob'), ['OK', 1])
    assert.deepEqual(await floodgate(service, 'user', 'bob'), ['OK', 0])
    assert.equal(await upstream(), 6)
    assert.deepEqual(await floodgate(service, 'user', 'bob'), ['OVER_LIMIT', 0])
    assert.match(await textCommand(home.port, `get ${key}\r\n`), /^VALUE \S+ 0 1\r\n7\r\nEND$/)
    assert.equal(await textCommand(away.port, `get ${key}\r\n`), 'END')
  })

  it("a descriptor memcache cannot hold as a key (a space) keeps Floodgate's layout, and is still limited", async () => {
    const codes = []
    for (let i = 0; i < 6; i++) codes.push((await floodgate(service, 'user', 'bob smith'))[0])
    assert.deepEqual(codes, ['OK', 'OK', 'OK', 'OK', 'OK', 'OVER_LIMIT'])
  })
})

/** Sends one text-protocol command to memcached on 127.0.0.1:`port` and answers its reply, trimmed. */
function textCommand(port: number, command: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1')
    let reply = ''
    socket.on('data', (chunk) => {
      reply += chunk.toString('latin1')
      if (/(^|\r\n)(END|STORED|NOT_STORED|NOT_FOUND|EXISTS|ERROR|CLIENT_ERROR[^\r]*|SERVER_ERROR[^\r]*|\d+)\r\n$/.test(reply)) {
        socket.end()
        resolve(reply.trimEnd())
      }
    })
    socket.on('error', reject)
    socket.write(command)
  })
}
