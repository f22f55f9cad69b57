// The Envoy RLS v3 gRPC API through a real grpc-js client generated from the service's protos at runtime.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import * as grpc from '@grpc/grpc-js'
import { rlsClients, scrape, startTestService, type TestService } from './helpers.js'

const descriptor = (entries: Record<string, string>, extra: Record<string, unknown> = {}) => ({
  entries: Object.entries(entries).map(([key, value]) => ({ key, value })),
  ...extra,
})

describe('Envoy RLS v3 gRPC (memory store)', () => {
  let service: TestService
  let client: ReturnType<typeof rlsClients>
  before(async () => {
    service = await startTestService()
    client = rlsClients(service.grpcPort)
  })
  after(async () => {
    client.close()
    await service.stop()
  })

  it('answers OK until the limit, then OVER_LIMIT with current_limit, remaining and duration_until_reset', async () => {
    const request = { domain: 'test', descriptors: [descriptor({ user: 'g1' })] }
    for (let i = 0; i < 3; i++) {
      const response = await client.shouldRateLimit(request)
      assert.equal(response.overall_code, 'OK')
      const status = response.statuses[0]
      assert.equal(status.code, 'OK')
      assert.deepEqual(status.current_limit, { name: '', requests_per_unit: 3, unit: 'DAY' })
      assert.equal(status.limit_remaining, 2 - i)
      assert.ok(Number(status.duration_until_reset.seconds) > 0)
    }
    const over = await client.shouldRateLimit(request)
    assert.equal(over.overall_code, 'OVER_LIMIT')
    assert.equal(over.statuses[0].code, 'OVER_LIMIT')
    assert.equal(over.statuses[0].limit_remaining, 0)
  })

  it('keeps statuses in request order: unlimited and unknown descriptors are OK without current_limit', async () => {
    const response = await client.shouldRateLimit({
      domain: 'test',
      descriptors: [descriptor({ vip: 'a' }), descriptor({ unknown: 'b' }), descriptor({ user: 'g2' })],
    })
    assert.equal(response.overall_code, 'OK')
    assert.equal(response.statuses.length, 3)
    assert.equal(response.statuses[0].code, 'OK')
    assert.equal(response.statuses[0].current_limit, null)
    assert.equal(response.statuses[1].current_limit, null)
    assert.equal(response.statuses[2].limit_remaining, 2)
    const otherDomain = await client.shouldRateLimit({ domain: 'elsewhere', descriptors: [descriptor({ user: 'g2' })] })
    assert.equal(otherDomain.overall_code, 'OK')
    assert.equal(otherDomain.statuses[0].current_limit, null)
  })

  it('hits_addend: the request value charges (0 means 1), a descriptor value wins and 0 only checks', async () => {
    const user = descriptor({ user: 'g3' })
    let response = await client.shouldRateLimit({ domain: 'test', descriptors: [user], hits_addend: 0 })
    assert.equal(response.statuses[0].limit_remaining, 2, 'request hits_addend 0 counts as 1')
    response = await client.shouldRateLimit({
      domain: 'test',
      descriptors: [descriptor({ user: 'g3' }, { hits_addend: { value: 0 } })],
      hits_addend: 5,
    })
    assert.equal(response.overall_code, 'OK')
    assert.equal(response.statuses[0].limit_remaining, 2, 'descriptor hits_addend 0 checks without counting')
    response = await client.shouldRateLimit({ domain: 'test', descriptors: [user], hits_addend: 2 })
    assert.equal(response.statuses[0].limit_remaining, 0)
    response = await client.shouldRateLimit({
      domain: 'test',
      descriptors: [descriptor({ user: 'g3' }, { hits_addend: { value: 1 } })],
      hits_addend: 0,
    })
    assert.equal(response.overall_code, 'OVER_LIMIT')
  })

  it('a per-descriptor limit override replaces the configured one (unnamed, keyed by descriptor and unit), even with no rule', async () => {
    const limit = { requests_per_unit: 1, unit: 'DAY' }
    // The configured limit is 3 per DAY; the override counts in the same day window of the same descriptor.
    assert.equal(
      (await client.shouldRateLimit({ domain: 'test', descriptors: [descriptor({ user: 'g4' })] })).statuses[0].limit_remaining,
      2,
    )
    const first = await client.shouldRateLimit({
      domain: 'test',
      descriptors: [descriptor({ user: 'g4' }, { limit: { requests_per_unit: 3, unit: 'DAY' } })],
    })
    assert.deepEqual(first.statuses[0].current_limit, { name: '', requests_per_unit: 3, unit: 'DAY' })
    assert.equal(first.statuses[0].limit_remaining, 1, 'the counter is shared: the rate is not part of its key')
    const over = await client.shouldRateLimit({ domain: 'test', descriptors: [descriptor({ user: 'g4' }, { limit })] })
    assert.equal(over.overall_code, 'OVER_LIMIT')
    const unmatched = await client.shouldRateLimit({ domain: 'test', descriptors: [descriptor({ nothing: 'z' }, { limit })] })
    assert.equal(unmatched.statuses[0].current_limit.requests_per_unit, 1)
    const unknownDomain = await client.shouldRateLimit({ domain: 'elsewhere', descriptors: [descriptor({ nothing: 'z' }, { limit })] })
    assert.equal(unknownDomain.statuses[0].current_limit, null, 'an override applies only in a configured domain')
  })

  it('maps limits: extension policies to the nearest Envoy unit (2 per 10s → 12 per MINUTE)', async () => {
    const response = await client.shouldRateLimit({ domain: 'test', descriptors: [descriptor({ burst: 'b' })] })
    assert.deepEqual(response.statuses[0].current_limit, { name: 'burst', requests_per_unit: 12, unit: 'MINUTE' })
  })

  it('shadow mode answers OK but counts the would-be denial in metrics', async () => {
    const request = { domain: 'test', descriptors: [descriptor({ trial: 'g5' })] }
    await client.shouldRateLimit(request)
    const before = (await scrape(service.httpUrl)).get('floodgate_shadow_mode{rule="test.trial"}') ?? 0
    const response = await client.shouldRateLimit(request)
    assert.equal(response.overall_code, 'OK')
    assert.equal(response.statuses[0].code, 'OK')
    const afterValue = (await scrape(service.httpUrl)).get('floodgate_shadow_mode{rule="test.trial"}')
    assert.equal(afterValue, before + 1)
  })

  it('rejects an empty domain, no descriptors and an UNKNOWN override unit with INVALID_ARGUMENT', async () => {
    const cases = [
      { domain: '', descriptors: [descriptor({ user: 'x' })] },
      { domain: 'test', descriptors: [] },
      { domain: 'test', descriptors: [descriptor({ user: 'x' }, { limit: { requests_per_unit: 1, unit: 'UNKNOWN' } })] },
    ]
    for (const request of cases) {
      await assert.rejects(client.shouldRateLimit(request), (error: grpc.ServiceError) => {
        assert.equal(error.code, grpc.status.INVALID_ARGUMENT)
        return true
      })
    }
  })

  it('serves grpc.health.v1.Health/Check for "", "ratelimit" (upstream\'s name) and the RLS service', async () => {
    assert.equal((await client.healthCheck()).status, 'SERVING')
    assert.equal((await client.healthCheck('ratelimit')).status, 'SERVING')
    assert.equal((await client.healthCheck('envoy.service.ratelimit.v3.RateLimitService')).status, 'SERVING')
    await assert.rejects(client.healthCheck('other.Service'), (error: grpc.ServiceError) => error.code === grpc.status.NOT_FOUND)
  })
})

describe('Envoy RLS v3 gRPC with response headers', () => {
  it('adds RateLimit-Limit/-Remaining/-Reset to response_headers_to_add when enabled, names configurable', async () => {
    const service = await startTestService(undefined, ['--grpc-response-headers', '--reset-header', 'X-Reset'])
    const client = rlsClients(service.grpcPort)
    try {
      const response = await client.shouldRateLimit({ domain: 'test', descriptors: [descriptor({ user: 'h1' })] })
      const headers = Object.fromEntries(response.response_headers_to_add.map((h: { key: string; value: string }) => [h.key, h.value]))
      assert.equal(headers['RateLimit-Limit'], '3')
      assert.equal(headers['RateLimit-Remaining'], '2')
      assert.equal(headers['X-Reset'], String(response.statuses[0].duration_until_reset.seconds))
    } finally {
      client.close()
      await service.stop()
    }
  })
})
