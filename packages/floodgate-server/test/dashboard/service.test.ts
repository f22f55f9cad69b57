// The service's /dashboard/data.json: off without the admin token, per-rule counts from HTTP and gRPC
// decisions, store latency on a real Redis, the breaker and fallbacks when it stops, reload errors.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { writeFileSync } from 'node:fs'
import type { DashboardSnapshot } from 'floodgate/dashboard'
import { startRedis, type RedisProcess } from '../../../floodgate/test/support/redis-server.js'
import { checkBody, postJson, startTestService, type TestService } from '../service/helpers.js'

const TOKEN = 'dashboard-test-token'
const auth = { authorization: `Bearer ${TOKEN}` }

async function snapshot(service: TestService): Promise<DashboardSnapshot> {
  const response = await fetch(`${service.httpUrl}/dashboard/data.json`, { headers: auth })
  assert.equal(response.status, 200)
  return (await response.json()) as DashboardSnapshot
}

async function eventually(what: string, check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (await check()) return
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error(`timed out waiting for ${what}`)
}

describe('service /dashboard', () => {
  it('is not routed without an admin token', async () => {
    const service = await startTestService()
    try {
      assert.equal((await fetch(`${service.httpUrl}/dashboard/data.json`, { headers: auth })).status, 404)
    } finally {
      await service.stop()
    }
  })

  it('counts per rule, shows keys hashed (raw with --dashboard-raw-keys) and the last reload error', async () => {
    for (const raw of [false, true]) {
      const service = await startTestService(undefined, ['--admin-token', TOKEN, ...(raw ? ['--dashboard-raw-keys'] : [])])
      try {
        for (let i = 0; i < 5; i++) await postJson(`${service.httpUrl}/v1/check`, checkBody('test', [{ user: 'eve' }]))
        const data = await snapshot(service)
        assert.deepEqual(data.totals, { allowed: 3, denied: 2 })
        // The rule hit first, then every other loaded rule at zero, in file order.
        assert.deepEqual(
          data.rules.map((rule) => [rule.rule, rule.allowed, rule.denied]),
          [
            ['test.user', 3, 2],
            ['test.vip', 0, 0],
            ['test.trial', 0, 0],
            ['test.burst', 0, 0],
            ['test.fast', 0, 0],
          ],
        )
        const [top] = data.topKeys.keys
        assert.equal(top.denied, 2)
        if (raw) assert.match(top.key, /eve/)
        else assert.match(top.key, /^sha256:[0-9a-f]{16}$/)
        assert.equal(data.config?.rules, 5)
        assert.equal(data.config?.lastReloadError, null)
        writeFileSync(service.rulesFile, 'domain: test\ndescriptors: [ {')
        assert.equal(service.reloadRules(), false)
        assert.match((await snapshot(service)).config?.lastReloadError?.[0] ?? '', /rules\.yaml/)
      } finally {
        await service.stop()
      }
    }
  })
})

describe('service /dashboard on Redis', () => {
  let redis: RedisProcess
  let service: TestService
  before(async () => {
    redis = await startRedis()
    const store = ['--redis', redis.url, '--redis-prefix', 'dash-test:', '--on-store-error', 'closed']
    service = await startTestService(undefined, ['--admin-token', TOKEN, ...store])
  })
  after(async () => {
    await service?.stop()
    await redis?.stop()
  })

  it('shows store latency, then the open breaker and closed-mode fallbacks once Redis stops', async () => {
    let probe = 0
    // A fresh user per probe: a decision the failure mode answered while Redis was connecting may still be charged.
    const probeOnce = () => postJson(`${service.httpUrl}/v1/check`, checkBody('test', [{ user: `probe-${probe++}` }]))
    await eventually('Redis connected', async () => (await probeOnce()).status === 200)
    for (let i = 0; i < 3; i++) await postJson(`${service.httpUrl}/v1/check`, checkBody('test', [{ user: 'r2' }]))
    let data = await snapshot(service)
    assert.equal(data.store.kind, 'redis')
    assert.equal(data.store.breaker, 'closed')
    // The latency of the last 10 whole seconds: wait until the calls' second has passed.
    await eventually('a latency sample', async () => ((await snapshot(service)).store.latency?.samples ?? 0) > 0)
    data = await snapshot(service)
    assert.ok(data.store.latency!.p99Ms! >= data.store.latency!.p50Ms!)
    await redis.stop()
    await eventually('the breaker open', async () => {
      await postJson(`${service.httpUrl}/v1/check`, checkBody('test', [{ user: 'r3' }]))
      return (await snapshot(service)).store.breaker === 'open'
    })
    data = await snapshot(service)
    assert.ok(data.store.errors > 0)
    assert.ok(data.store.fallbacks.closed > 0)
    await redis.restart()
  })
})
