// /metrics scraped as Prometheus text: per-rule counters move with decisions; labels never carry request values.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { checkBody, parseMetrics, postJson, scrape, startTestService, type TestService } from './helpers.js'
import { createPolicies, MemoryStore, RateLimiter } from 'floodgate'
import { Histogram, Registry } from 'prom-client'
import { LatencyHistogram } from '../../src/service/latency-histogram.js'
import { LATENCY_BUCKETS, ServiceMetrics, OTHER_RULE } from '../../src/service/metrics.js'
import { nearLimitThreshold, upstreamCounts } from '../../src/service/hit-counts.js'

describe('/metrics', () => {
  let service: TestService
  before(async () => {
    service = await startTestService()
  })
  after(async () => {
    await service.stop()
  })

  it('counts hits, within/near/over limit per rule and observes latency', async () => {
    const url = `${service.httpUrl}/v1/check`
    for (let i = 0; i < 4; i++) await postJson(url, checkBody('test', [{ user: 'metrics-user' }]))
    const response = await fetch(`${service.httpUrl}/metrics`)
    assert.match(response.headers.get('content-type') ?? '', /^text\/plain/)
    const metrics = parseMetrics(await response.text())
    const rule = '{rule="test.user"}'
    assert.equal(metrics.get(`floodgate_total_hits${rule}`), 4)
    assert.equal(metrics.get(`floodgate_within_limit${rule}`), 3)
    assert.equal(metrics.get(`floodgate_over_limit${rule}`), 1)
    // 3 per day: the 3rd hit uses 100% ≥ 80%, the 2nd 67%: one near-limit hit.
    assert.equal(metrics.get(`floodgate_near_limit${rule}`), 1)
    assert.ok((metrics.get('floodgate_decision_duration_seconds_count{transport="http"}') ?? 0) >= 4)
    assert.equal(metrics.get('floodgate_breaker_state'), 0)
    assert.equal(metrics.get('floodgate_store_errors_total'), 0)
    for (const key of metrics.keys()) assert.ok(!key.includes('metrics-user'), `raw value leaked into ${key}`)
  })

  it('counts deny-cache answers (limits: rules; upstream-format rules count every hit in the store)', async () => {
    const url = `${service.httpUrl}/v1/check`
    for (let i = 0; i < 6; i++) await postJson(url, checkBody('test', [{ burst: 'dc' }]))
    const metrics = await scrape(service.httpUrl)
    assert.ok((metrics.get('floodgate_deny_cache_hits{rule="test.burst"}') ?? 0) >= 1)
  })
})

describe('LatencyHistogram', () => {
  it("exposes what prom-client's Histogram exposes for the same observations, and resets as it does", async () => {
    const ours = new Registry()
    const reference = new Registry()
    const histogram = new LatencyHistogram({
      name: 'test_duration_seconds',
      help: 'Time taken.',
      labelName: 'transport',
      labelValues: ['http', 'grpc'] as const,
      buckets: LATENCY_BUCKETS,
      registers: [ours],
    })
    const theirs = new Histogram({
      name: 'test_duration_seconds',
      help: 'Time taken.',
      labelNames: ['transport'] as const,
      buckets: [...LATENCY_BUCKETS],
      registers: [reference],
    })
    assert.equal(await ours.metrics(), await reference.metrics(), 'nothing observed yet')
    const observations: ['http' | 'grpc', number][] = [
      ['grpc', 0.0003],
      ['http', 0.00005],
      ['http', 2],
      ['grpc', 0.01],
      ['http', 0.001],
      ['http', 0.0001],
    ]
    for (const [transport, seconds] of observations) {
      histogram.observe(transport, seconds)
      theirs.observe({ transport }, seconds)
    }
    assert.equal(await ours.metrics(), await reference.metrics())
    assert.deepEqual(await ours.getMetricsAsJSON(), await reference.getMetricsAsJSON())
    ours.resetMetrics()
    reference.resetMetrics()
    histogram.observe('http', 0.004)
    theirs.observe({ transport: 'http' }, 0.004)
    assert.equal(await ours.metrics(), await reference.metrics(), 'after a reset')
  })
})

describe('ServiceMetrics', () => {
  it('caps the number of rule labels', async () => {
    const metrics = new ServiceMetrics({ maxRuleLabels: 2, processMetrics: false })
    for (const rule of ['a', 'b', 'c', 'd']) metrics.recordHit(rule, { total: 1, within: 1, over: 0, near: 0, shadow: 0, denyCache: 0 })
    const values = parseMetrics((await metrics.expose()).body)
    assert.equal(values.get('floodgate_total_hits{rule="a"}'), 1)
    assert.equal(values.get('floodgate_total_hits{rule="b"}'), 1)
    assert.equal(values.get(`floodgate_total_hits{rule="${OTHER_RULE}"}`), 2)
    assert.equal(values.has('floodgate_total_hits{rule="c"}'), false)
  })
})

describe('ServiceMetrics per-rule counters', () => {
  const hit = { total: 1, within: 1, over: 0, near: 0, shadow: 0, denyCache: 0 }

  it('show every hit recorded before a scrape, once, however many scrapes there are', async () => {
    const metrics = new ServiceMetrics({ processMetrics: false })
    metrics.recordHit('r', { ...hit, total: 2, within: 2, near: 2 })
    metrics.recordHit('r', { ...hit, within: 0, over: 1, denyCache: 1 })
    metrics.recordHit('s', { ...hit, within: 0, over: 1, shadow: 1 })
    let values = parseMetrics((await metrics.expose()).body)
    assert.equal(values.get('floodgate_total_hits{rule="r"}'), 3)
    assert.equal(values.get('floodgate_within_limit{rule="r"}'), 2)
    assert.equal(values.get('floodgate_near_limit{rule="r"}'), 2)
    assert.equal(values.get('floodgate_over_limit{rule="r"}'), 1)
    assert.equal(values.get('floodgate_deny_cache_hits{rule="r"}'), 1)
    assert.equal(values.get('floodgate_over_limit{rule="s"}'), 1)
    assert.equal(values.get('floodgate_shadow_mode{rule="s"}'), 1)
    assert.equal(values.has('floodgate_within_limit{rule="s"}'), false, 'a kind never hit has no series')
    assert.equal((await metrics.expose()).body, (await metrics.expose()).body, 'a scrape alone changes nothing')
    metrics.recordHit('r', hit)
    values = parseMetrics((await metrics.expose()).body)
    assert.equal(values.get('floodgate_total_hits{rule="r"}'), 4)
    assert.equal(values.get('floodgate_within_limit{rule="r"}'), 3)
    const total = await metrics.registry.getSingleMetric('floodgate_total_hits')!.get()
    assert.deepEqual(
      total.values.map((v) => [v.labels.rule, v.value]),
      [
        ['r', 4],
        ['s', 1],
      ],
    )
  })
})

describe('ServiceMetrics upstream names (USE_PROMETHEUS)', () => {
  it('exports ratelimit_service_rate_limit_* with domain and key labels, as upstream statsd mapping does', async () => {
    const metrics = new ServiceMetrics({ processMetrics: false, upstreamNames: true })
    metrics.recordHit('edge.remote_address', { total: 3, within: 2, over: 1, near: 1, shadow: 0, denyCache: 0 })
    metrics.recordHit('edge.plan_premium.user_alice', { total: 1, within: 1, over: 0, near: 0, shadow: 0, denyCache: 0 })
    metrics.recordHit('edge.remote_address_10.0.0.1', { total: 1, within: 0, over: 1, near: 0, shadow: 1, denyCache: 0 })
    metrics.recordRequestError('store')
    metrics.recordReload('success')
    const values = parseMetrics((await metrics.expose()).body)
    assert.equal(values.get('ratelimit_service_rate_limit_total_hits{domain="edge",key1="remote_address",key2=""}'), 3)
    assert.equal(values.get('ratelimit_service_rate_limit_over_limit{domain="edge",key1="remote_address",key2=""}'), 1)
    assert.equal(values.get('ratelimit_service_rate_limit_near_limit{domain="edge",key1="remote_address",key2=""}'), 1)
    assert.equal(values.get('ratelimit_service_rate_limit_within_limit{domain="edge",key1="plan_premium",key2="user_alice"}'), 1)
    // An IPv4 address's dots become underscores, as upstream sanitizes stat names.
    assert.equal(values.get('ratelimit_service_rate_limit_shadow_mode{domain="edge",key1="remote_address_10_0_0_1",key2=""}'), 1)
    assert.equal(values.get('floodgate_total_hits{rule="edge.remote_address"}'), 3, 'Floodgate names are still there')
    assert.equal(values.get('ratelimit_service_should_rate_limit_error{err_type="redis_error"}'), 1)
    assert.equal(values.get('ratelimit_service_config_load_success'), 1)
  })

  it('are absent unless asked for', async () => {
    const metrics = new ServiceMetrics({ processMetrics: false })
    metrics.recordHit('edge.a', { total: 1, within: 1, over: 0, near: 0, shadow: 0, denyCache: 0 })
    assert.doesNotMatch((await metrics.expose()).body, /ratelimit_service_/)
  })
})

describe('upstreamCounts (upstream stats arithmetic)', () => {
  const status = (requestsPerUnit: number, count: number) => ({
    unit: 'HOUR' as const,
    requestsPerUnit,
    name: '',
    count,
    over: count > requestsPerUnit,
  })

  it('a request crossing the limit counts only the hits past it as over, the rest up to the limit as near', () => {
    // 13 → 15 against 14: one hit over; near from max(11, 13) to 14: one.
    assert.deepEqual(upstreamCounts(2, false, status(14, 15), 0.8), { total: 2, over: 1, near: 1, within: 0, shadow: 0, denyCache: 0 })
    // Already over before: every hit is over, none near.
    assert.deepEqual(upstreamCounts(3, true, status(14, 20), 0.8), { total: 3, over: 3, near: 0, within: 0, shadow: 3, denyCache: 0 })
  })

  it('within the limit, only the hits past the near threshold are near', () => {
    // floor(10 × 0.8) = 8: 7 → 9 puts one hit past it.
    assert.deepEqual(upstreamCounts(2, false, status(10, 9), 0.8), { total: 2, over: 0, near: 1, within: 2, shadow: 0, denyCache: 0 })
    assert.deepEqual(upstreamCounts(1, false, status(10, 5), 0.8), { total: 1, over: 0, near: 0, within: 1, shadow: 0, denyCache: 0 })
    assert.equal(nearLimitThreshold(3, 0.8), 2)
  })
})

describe('ServiceMetrics sync state', () => {
  it("exports write-back's unflushed units and the leases held, read from the limiter at each scrape", async () => {
    let now = 1_700_000_000_000
    // Timers that never fire: nothing flushes unless the test says so.
    const timers = { now: () => now, setTimeout: () => ({}) }
    const store = new MemoryStore({ clock: () => now })
    const limiter = new RateLimiter({ store, clock: () => now, timers, denyCache: false })
    const writeBack = createPolicies([{ name: 'wb', algorithm: 'fixed-window', limit: 100, period: '1h', sync: 'write-back' }])
    const leased = createPolicies([{ name: 'ls', algorithm: 'fixed-window', limit: 1000, period: '1h', sync: 'lease', leaseMs: '1m' }])
    const metrics = new ServiceMetrics({ processMetrics: false })
    metrics.watchSync(() => limiter.syncState())
    let values = parseMetrics((await metrics.expose()).body)
    assert.equal(values.get('floodgate_write_back_unflushed_units'), 0, 'exported before any sync rule is used')
    assert.equal(values.get('floodgate_leases_held'), 0)
    for (let i = 0; i < 5; i++) assert.ok((await limiter.limit('k', { policies: writeBack })).allowed)
    for (let i = 0; i < 20; i++) assert.ok((await limiter.limit('k', { policies: leased })).allowed)
    values = parseMetrics((await metrics.expose()).body)
    assert.equal(values.get('floodgate_write_back_keys'), 1)
    assert.equal(values.get('floodgate_write_back_unflushed_units'), 5)
    assert.equal(values.get('floodgate_write_back_store_calls_total'), 1)
    assert.equal(values.get('floodgate_leases_held'), 1)
    const units = values.get('floodgate_lease_units_held') ?? 0
    assert.ok(units > 0)
    assert.equal(1000 - store.evaluateSync({ key: 'k', policies: leased, cost: 0 }).results[0].remaining, 20 + units)
    await limiter.flush()
    now += 1
    values = parseMetrics((await metrics.expose()).body)
    assert.equal(values.get('floodgate_write_back_unflushed_units'), 0)
    assert.equal(values.get('floodgate_write_back_store_calls_total'), 2, 'the counter grew by the flush')
    await limiter.close()
    values = parseMetrics((await metrics.expose()).body)
    assert.equal(values.get('floodgate_leases_held'), 0)
    assert.equal(values.get('floodgate_lease_units_held'), 0)
    assert.equal(values.get('floodgate_leases_returned_total'), values.get('floodgate_leases_acquired_total'))
  })
})
