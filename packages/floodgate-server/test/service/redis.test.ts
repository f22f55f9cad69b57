// The service on a real Redis (startRedis + RedisStore): HTTP and /json and gRPC limits, readiness, and fail-open when Redis goes away.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { startRedis, type RedisProcess } from '../../../floodgate/test/support/redis-server.js'
import { checkBody, postJson, rlsClients, scrape, startTestService, type TestService } from './helpers.js'

async function eventually(probe: () => Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (await probe()) return
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  assert.fail(`timed out waiting for ${what}`)
}

describe('service on Redis', () => {
  let redis: RedisProcess
  let service: TestService
  before(async () => {
    redis = await startRedis()
    service = await startTestService(undefined, ['--redis', redis.url, '--redis-prefix', 'svc-test:', '--store-timeout', '5s'])
  })
  after(async () => {
    await service?.stop()
    await redis?.stop()
  })

  it('is ready once Redis is connected', async () => {
    await eventually(
      async () => ((await (await fetch(`${service.httpUrl}/readyz`)).json()) as { status: string }).status === 'ready',
      'readiness',
    )
  })

  it('POST /v1/check answers 200 until the limit, then 429; the state is in Redis', async () => {
    const url = `${service.httpUrl}/v1/check`
    const body = checkBody('test', [{ user: 'redis-alice' }])
    const statuses: number[] = []
    for (let i = 0; i < 5; i++) statuses.push((await postJson(url, body)).status)
    assert.deepEqual(statuses, [200, 200, 200, 429, 429])
    const { Redis } = await import('ioredis')
    const client = new Redis(redis.url)
    try {
      const keys = await client.keys('svc-test:*')
      assert.ok(
        keys.some((key) => key.includes('redis-alice')),
        `keys: ${keys.join(', ')}`,
      )
    } finally {
      client.disconnect()
    }
  })

  it('POST /json and gRPC share the counters', async () => {
    const request = { domain: 'test', descriptors: [{ entries: [{ key: 'user', value: 'redis-bob' }] }] }
    assert.equal((await postJson(`${service.httpUrl}/json`, request)).body.statuses[0].limitRemaining, 2)
    const client = rlsClients(service.grpcPort)
    try {
      assert.equal((await client.shouldRateLimit(request)).statuses[0].limit_remaining, 1)
      assert.equal((await client.shouldRateLimit(request)).overall_code, 'OK')
      assert.equal((await client.shouldRateLimit(request)).overall_code, 'OVER_LIMIT')
    } finally {
      client.close()
    }
    const over = await postJson(`${service.httpUrl}/json`, request)
    assert.equal(over.status, 429)
    assert.equal(over.body.overallCode, 'OVER_LIMIT')
  })

  it('fails open when Redis goes away, and says so in /readyz and /metrics', async () => {
    await redis.stop()
    const url = `${service.httpUrl}/v1/check`
    let last
    for (let i = 0; i < 8; i++) last = await postJson(url, checkBody('test', [{ user: `gone-${i}` }]))
    assert.equal(last!.status, 200)
    assert.equal(last!.body.results[0].source, 'fallback-open')
    await eventually(
      async () => ((await (await fetch(`${service.httpUrl}/readyz`)).json()) as { status: string }).status === 'degraded',
      'degraded readiness',
    )
    const metrics = await scrape(service.httpUrl)
    assert.ok((metrics.get('floodgate_store_errors_total') ?? 0) >= 1)
    assert.ok((metrics.get('floodgate_fallback_decisions_total{mode="open"}') ?? 0) >= 1)
  })
})
