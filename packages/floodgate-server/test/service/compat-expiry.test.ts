// Shared counters' expiry (--compat-keys envoy): the unit's seconds plus upstream's random jitter
// (EXPIRATION_JITTER_MAX_SECONDS, default 300), read back from a real Redis (TTL) and real memcached (metadump).

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { Redis } from 'ioredis'
import { startRedis, type RedisProcess } from '../../../floodgate/test/support/redis-server.js'
import { keysWithExpiry, startMemcached, type MemcachedProcess } from '../../../floodgate/test/support/memcached-server.js'
import { jitteredExpiry, memcachedExpiry } from '../../src/service/compat-expiry.js'
import { readSettings } from '../../src/service/settings.js'
import { postJson, startTestService, type TestService } from './helpers.js'

const RULES = `
domain: jit
descriptors:
  - key: user
    rate_limit: { unit: day, requests_per_unit: 5 }
  - key: monthly
    rate_limit: { unit: month, requests_per_unit: 5 }
  - key: yearly
    rate_limit: { unit: year, requests_per_unit: 5 }
`
const DAY_S = 86_400
const MONTH_S = 2_592_000
const YEAR_S = 31_536_000

async function decide(service: TestService, key: string, value: string): Promise<[string, number]> {
  const { body } = await postJson(`${service.httpUrl}/json`, { domain: 'jit', descriptors: [{ entries: [{ key, value }] }] })
  return [body.overallCode ?? 'ERROR', body.statuses?.[0]?.limitRemaining ?? 0]
}

describe('the expiry arithmetic', () => {
  it("adds 0 to max − 1 seconds, as Go's Int63n(max), and nothing for 0", () => {
    assert.equal(jitteredExpiry(300, () => 0)(60), 60)
    assert.equal(jitteredExpiry(300, () => 0.5)(60), 210)
    assert.equal(jitteredExpiry(300, () => 0.999_999_999_9)(60), 359)
    assert.equal(jitteredExpiry(1, () => 0.99)(60), 60)
    assert.equal(jitteredExpiry(0, () => 0.99)(60), 60)
  })

  it('sends memcached an expiry past 30 days as a Unix time, which it would otherwise read as one in 1970', () => {
    const now = 1_800_000_000_500
    assert.equal(memcachedExpiry(MONTH_S, now), MONTH_S)
    assert.equal(memcachedExpiry(MONTH_S + 1, now), 1_800_000_001 + MONTH_S + 1)
    assert.equal(memcachedExpiry(YEAR_S, now), 1_800_000_001 + YEAR_S)
  })

  it("reads upstream's EXPIRATION_JITTER_MAX_SECONDS, defaults to its 300, and names a bad value", () => {
    assert.equal(readSettings(['--config', 'r.yaml'], {}).compatExpiryJitterSeconds, 300)
    assert.equal(readSettings(['--config', 'r.yaml'], { EXPIRATION_JITTER_MAX_SECONDS: '0' }).compatExpiryJitterSeconds, 0)
    assert.equal(readSettings(['--config', 'r.yaml', '--compat-expiry-jitter', '45'], {}).compatExpiryJitterSeconds, 45)
    assert.throws(
      () => readSettings(['--config', 'r.yaml'], { EXPIRATION_JITTER_MAX_SECONDS: '-5' }),
      /compat-expiry-jitter.*whole number/s,
    )
    assert.throws(() => readSettings(['--config', 'r.yaml', '--compat-expiry-jitter', '99999999999']), /at most 31536000/)
  })
})

describe('on a real Redis', () => {
  let redis: RedisProcess
  let client: Redis
  const services: TestService[] = []

  before(async () => {
    redis = await startRedis()
    client = new Redis({ port: redis.port, lazyConnect: true })
    await client.connect()
  })
  after(async () => {
    await Promise.all(services.map((service) => service.stop()))
    client?.disconnect()
    await redis?.stop()
  })

  /** The TTL of each of `users` day counters counted by a service with `args`, under `prefix`. */
  async function ttls(prefix: string, users: number, args: string[]): Promise<number[]> {
    const service = await startTestService(RULES, ['--redis', redis.url, '--compat-keys', 'envoy', '--compat-prefix', prefix, ...args])
    services.push(service)
    // The counter's client queues nothing while it connects: wait until a decision (not counted below) reaches Redis.
    for (let tries = 0; (await decide(service, 'monthly', 'warm-up'))[0] === 'ERROR'; tries++) {
      assert.ok(tries < 400, "upstream's Redis never answered")
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    for (let i = 0; i < users; i++) assert.deepEqual(await decide(service, 'user', `u${i}`), ['OK', 4])
    const keys = await client.keys(`${prefix}jit_user_*`)
    assert.equal(keys.length, users)
    return Promise.all(keys.map((key) => client.ttl(key)))
  }

  it('spreads the counters of one window over the jitter, each within its unit plus the jitter', async () => {
    const seen = await ttls('spread_', 40, ['--compat-expiry-jitter', '1000'])
    // The test runs for seconds, not the ~950 s the assertion below allows for.
    for (const ttl of seen) assert.ok(ttl > DAY_S - 60 && ttl <= DAY_S + 999, `ttl ${ttl}`)
    // 40 draws from 0..999 all within 100 of each other: about 1 chance in 10^38.
    assert.ok(Math.max(...seen) - Math.min(...seen) > 100, `ttls ${seen.join(' ')}`)
    assert.ok(
      seen.some((ttl) => ttl > DAY_S),
      `ttls ${seen.join(' ')}`,
    )
  })

  it('with 0, every counter expires at the end of its unit, as upstream with jitter off', async () => {
    const seen = await ttls('none_', 10, ['--compat-expiry-jitter', '0'])
    for (const ttl of seen) assert.ok(ttl > DAY_S - 60 && ttl <= DAY_S, `ttl ${ttl}`)
  })
})

describe('on real memcached', () => {
  let server: MemcachedProcess
  let service: TestService
  // Frozen mid-run, so no window turns over between two requests of a test.
  const T0 = Date.now()

  before(async () => {
    server = await startMemcached()
    const args = ['--memcached', server.address, '--compat-keys', 'envoy', '--compat-expiry-jitter', '600', '--store-timeout', '5s']
    service = await startTestService(RULES, args, { clock: () => T0 })
  })
  after(async () => {
    await service?.stop()
    await server?.stop()
  })

  it('a month (past 30 days with its jitter) and a year still count, to the limit', async () => {
    for (const key of ['monthly', 'yearly']) {
      const answers = []
      for (let i = 0; i < 6; i++) answers.push((await decide(service, key, 'acct'))[1])
      assert.deepEqual(answers, [4, 3, 2, 1, 0, 0], key)
      assert.equal((await decide(service, key, 'acct'))[0], 'OVER_LIMIT', key)
    }
  })

  it("each counter expires at its unit's end plus the jitter, as memcached reports it", async () => {
    for (let i = 0; i < 30; i++) await decide(service, 'user', `m${i}`)
    await decide(service, 'monthly', 'exp')
    const expiries = await keysWithExpiry(server)
    const now = Math.ceil(T0 / 1000)
    const days = [...expiries].filter(([key]) => key.startsWith('jit_user_m')).map(([, exp]) => exp - now)
    assert.equal(days.length, 30)
    // memcached stores a relative expiry against its own clock, a few seconds at most from the test's T0.
    for (const left of days) assert.ok(left > DAY_S - 60 && left < DAY_S + 600 + 60, `expires in ${left}`)
    assert.ok(Math.max(...days) - Math.min(...days) > 60, `expiries ${days.join(' ')}`)
    const month = [...expiries].find(([key]) => key.startsWith('jit_monthly_exp_'))
    assert.ok(month !== undefined, 'the month counter is kept')
    assert.ok(month[1] - now > MONTH_S - 60 && month[1] - now < MONTH_S + 600, `month expires in ${month[1] - now}`)
  })
})
