// Conformance with envoyproxy/ratelimit end to end (its test/integration and integration-test
// scripts): counting, hits addends, overrides, reset times, STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT,
// /json, Prometheus names and abuse bounds — over gRPC with an official Envoy client and /json, on the
// memory store and on a real redis-server. A deployment's environment: integration-deployment.test.ts.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import * as grpc from '@grpc/grpc-js'
import { scrape } from '../service/helpers.js'
import { desc, encodeRequest, postJsonApi, resetSecondsBetween, startConformance, STORES, unique, type Conformance } from './support.js'
import { RULES } from './basic-rules.js'

const grpcError = (code: grpc.status) => (error: grpc.ServiceError) => error.code === code

for (const store of STORES) {
  describe(`conformance: integration (upstream test/integration), ${store} store`, () => {
    let c: Conformance
    before(async () => {
      c = await startConformance(store, RULES, ['--upstream-metrics'])
    })
    after(async () => {
      await c.stop()
    })
    const one = (pairs: Record<string, string>, extra = {}, hits?: number) =>
      c.client.shouldRateLimit({ domain: 'basic', descriptors: [desc(pairs, extra)], ...(hits === undefined ? {} : { hits_addend: hits }) })

    it('testBasicConfig: an unknown domain answers OK with no limit', async () => {
      const response = await c.client.shouldRateLimit({ domain: 'foo', descriptors: [desc({ hello: 'world' })] })
      assert.deepEqual(response, {
        overall_code: 'OK',
        statuses: [{ code: 'OK', current_limit: null, limit_remaining: 0, duration_until_reset: null }],
        response_headers_to_add: [],
        request_headers_to_add: [],
        raw_body: Buffer.alloc(0),
        dynamic_metadata: null,
        quota: null,
      })
    })

    it('testBasicConfig: a hit reports current_limit, limit - 1 remaining, and whole seconds until the window ends', async () => {
      const started = Date.now()
      const status = (await one({ key1: unique('k1') })).statuses[0]
      assert.deepEqual(status.current_limit, { name: '', requests_per_unit: 50, unit: 'DAY' })
      assert.equal(status.limit_remaining, 49)
      assert.equal(status.duration_until_reset?.nanos, 0)
      assert.ok(resetSecondsBetween(86_400, started, Date.now()).includes(status.duration_until_reset?.seconds ?? -1))
    })

    it('testBasicConfig: 25 hits on a limit of 20: 19…0 remaining, then OVER_LIMIT with 0; over_limit counts hits past it', async () => {
      const value = unique('k2')
      for (let i = 0; i < 25; i++) {
        const response = await one({ key2: value })
        const over = i >= 20
        assert.equal(response.overall_code, over ? 'OVER_LIMIT' : 'OK', `hit ${i + 1}`)
        assert.equal(response.statuses[0].limit_remaining, over ? 0 : 20 - (i + 1))
      }
      const metrics = await scrape(c.service.httpUrl)
      assert.ok((metrics.get('ratelimit_service_rate_limit_over_limit{domain="basic",key1="key2",key2=""}') ?? 0) >= 5)
    })

    it('testBasicConfig: two descriptors of one request are counted independently', async () => {
      const value = unique('two')
      let response
      for (let i = 0; i < 11; i++)
        response = await c.client.shouldRateLimit({ domain: 'basic', descriptors: [desc({ key2: value }), desc({ key3: value })] })
      assert.equal(response!.overall_code, 'OVER_LIMIT')
      assert.deepEqual(
        response!.statuses.map((s) => [s.code, s.limit_remaining]),
        [
          ['OK', 9],
          ['OVER_LIMIT', 0],
        ],
      )
    })

    it('quota.sh / token-quota: check with hits_addend 0, charge when done; an over-charge makes the next check block', async () => {
      const value = unique('q')
      const check = () => one({ quota: value }, { hits_addend: 0 })
      assert.equal((await check()).overall_code, 'OK')
      assert.equal((await one({ quota: value }, { hits_addend: 2 })).overall_code, 'OK')
      assert.equal((await check()).statuses[0].limit_remaining, 1)
      // The stream used 4 more: upstream increments, then compares, so the count passes the limit.
      assert.equal((await one({ quota: value }, { hits_addend: 4 })).overall_code, 'OVER_LIMIT')
      const blocked = await check()
      assert.deepEqual([blocked.overall_code, blocked.statuses[0].limit_remaining], ['OVER_LIMIT', 0])
    })

    it('denied hits are counted (increment, then compare): a 0-hit check after a denial stays OVER_LIMIT', async () => {
      const value = unique('d')
      for (let i = 0; i < 4; i++) await one({ quota: value })
      assert.equal((await one({ quota: value }, { hits_addend: 0 })).overall_code, 'OVER_LIMIT')
      // A limits: rule keeps Floodgate's model: a denied hit is not charged, so the check passes.
      const fg = unique('fg')
      await one({ floodgate: fg })
      assert.equal((await one({ floodgate: fg })).overall_code, 'OVER_LIMIT')
      assert.equal((await one({ floodgate: fg }, { hits_addend: 0 })).overall_code, 'OK')
    })

    it('the request hits_addend charges every descriptor without its own (0 means 1)', async () => {
      const value = unique('h')
      assert.equal((await one({ key3: value }, {}, 0)).statuses[0].limit_remaining, 9)
      assert.equal((await one({ key3: value }, {}, 4)).statuses[0].limit_remaining, 5)
    })

    it('requests_per_unit 0 denies every charged hit', async () => {
      const response = await one({ deny_all: unique('z') })
      assert.deepEqual([response.overall_code, response.statuses[0].limit_remaining], ['OVER_LIMIT', 0])
    })

    it('overrides: keyed by descriptor and unit (a new rate keeps the count), 0 is OVER_LIMIT, WEEK is a unit', async () => {
      const value = unique('ov')
      const at = (requests: number, unit = 'HOUR') => one({ key1: value }, { limit: { requests_per_unit: requests, unit } })
      assert.equal((await at(5)).statuses[0].limit_remaining, 4)
      assert.equal((await at(5)).statuses[0].limit_remaining, 3)
      const changed = await at(3)
      assert.deepEqual([changed.statuses[0].code, changed.statuses[0].limit_remaining], ['OK', 0], 'the 3rd hit of the hour, against 3')
      assert.equal((await at(3)).overall_code, 'OVER_LIMIT')
      assert.equal((await one({ key1: unique('z') }, { limit: { requests_per_unit: 0, unit: 'HOUR' } })).overall_code, 'OVER_LIMIT')
      const started = Date.now()
      const week = (await at(10, 'WEEK')).statuses[0]
      assert.deepEqual(week.current_limit, { name: '', requests_per_unit: 10, unit: 'WEEK' })
      assert.ok(resetSecondsBetween(604_800, started, Date.now()).includes(week.duration_until_reset?.seconds ?? -1))
    })

    it('replaces.sh: a matched rule replaces the named one; an unlimited rule with replaces drops it too', async () => {
      const value = unique('r')
      await one({ foo: value })
      assert.equal((await one({ foo: value })).overall_code, 'OVER_LIMIT', 'foo alone: 1 per day')
      const replaced = await c.client.shouldRateLimit({ domain: 'basic', descriptors: [desc({ foo: value }), desc({ bar: value })] })
      assert.equal(replaced.overall_code, 'OK')
      assert.equal(replaced.statuses[0].current_limit, null, 'foo_limit is replaced by bar')
      const unlimited = await c.client.shouldRateLimit({ domain: 'basic', descriptors: [desc({ foo: value }), desc({ baz: value })] })
      assert.equal(unlimited.overall_code, 'OK')
      assert.deepEqual(
        unlimited.statuses.map((s) => s.limit_remaining),
        [0, 4294967295],
      )
    })

    it('value-included-in-stats-key-when-unspecified.sh: a detailed_metric key-only rule counts under key_value', async () => {
      const value = unique('unspecified_value')
      for (let i = 0; i < 3; i++) await one({ unspec: value })
      const metrics = await scrape(c.service.httpUrl)
      assert.equal(metrics.get(`ratelimit_service_rate_limit_over_limit{domain="basic",key1="unspec_${value}",key2=""}`), 1)
      assert.equal(metrics.get(`ratelimit_service_rate_limit_total_hits{domain="basic",key1="unspec_${value}",key2=""}`), 3)
    })

    it('/json: protobuf JSON in and out, 200 then 429, camelCase and snake_case names', async () => {
      const value = unique('j')
      const body = { domain: 'basic', descriptors: [{ entries: [{ key: 'deny_all', value }] }] }
      const over = await postJsonApi(c.service.httpUrl, body)
      assert.equal(over.status, 429)
      assert.match(over.type, /^application\/json/)
      assert.deepEqual(over.json, {
        overallCode: 'OVER_LIMIT',
        statuses: [{ code: 'OVER_LIMIT', currentLimit: { unit: 'DAY' }, durationUntilReset: over.json.statuses[0].durationUntilReset }],
      })
      assert.match(over.json.statuses[0].durationUntilReset, /^\d+s$/)
      const ok = await postJsonApi(c.service.httpUrl, {
        domain: 'basic',
        hits_addend: 2,
        descriptors: [{ entries: [{ key: 'key3', value }], hitsAddend: '1' }],
      })
      assert.equal(ok.status, 200)
      assert.equal(ok.json.statuses[0].limitRemaining, 9)
    })

    it('/json: GET, an unknown field, bad JSON and a wrong type are 400 text/plain "Bad Request"', async () => {
      const cases = [
        await postJsonApi(c.service.httpUrl, undefined, 'GET'),
        await postJsonApi(c.service.httpUrl, { domain: 'basic', descriptors: [], unknownField: 1 }),
        await postJsonApi(c.service.httpUrl, '{"domain": '),
        await postJsonApi(c.service.httpUrl, { domain: 5 }),
      ]
      for (const response of cases) {
        assert.equal(response.status, 400)
        assert.equal(response.text, 'Bad Request\n')
        assert.match(response.type, /^text\/plain/)
      }
      const typed = await fetch(`${c.service.httpUrl}/json`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"domain": ',
      })
      assert.deepEqual([typed.status, await typed.text()], [400, 'Bad Request\n'], 'malformed JSON sent as application/json')
      const huge = await postJsonApi(c.service.httpUrl, {
        domain: 'basic',
        descriptors: [{ entries: [{ key: 'key1', value: 'x'.repeat(70_000) }] }],
      })
      assert.deepEqual([huge.status, huge.text], [413, 'Request Entity Too Large\n'], 'a body past --body-limit')
    })
  })

  describe(`conformance: STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT, ${store} store`, () => {
    it('a request that takes one descriptor over its limit does not charge the descriptors within theirs', async () => {
      const c = await startConformance(store, RULES, ['--stop-increment-when-over-limit'])
      try {
        const value = unique('stop')
        const both = (hits: number) =>
          c.client.shouldRateLimit({
            domain: 'basic',
            descriptors: [desc({ key4: value }, { hits_addend: hits }), desc({ key5: value }, { hits_addend: hits })],
          })
        assert.deepEqual(
          (await both(13)).statuses.map((s) => s.limit_remaining),
          [2, 1],
        )
        const response = await both(2)
        assert.equal(response.overall_code, 'OVER_LIMIT')
        assert.deepEqual(
          response.statuses.map((s) => [s.code, s.limit_remaining]),
          [
            ['OK', 2],
            ['OVER_LIMIT', 0],
          ],
        )
        const check = await both(0)
        assert.deepEqual(
          check.statuses.map((s) => s.limit_remaining),
          [2, 0],
          'key4 was not charged; key5 was (15 > 14)',
        )
      } finally {
        await c.stop()
      }
    })
  })

  describe(`conformance: abuse bounds, ${store} store`, () => {
    let c: Conformance
    before(async () => {
      c = await startConformance(store, RULES)
    })
    after(async () => {
      await c.stop()
    })

    // Abuse finding (4): one call with 100,000 descriptors took 2.9 s and +330 MiB.
    it('too many descriptors, or entries in one, is INVALID_ARGUMENT (400 on /json) with the cap named', async () => {
      const descriptors = Array.from({ length: 65 }, (_, i) => desc({ key1: `v${i}` }))
      await assert.rejects(
        c.client.shouldRateLimit({ domain: 'basic', descriptors }),
        (error: grpc.ServiceError) =>
          error.code === grpc.status.INVALID_ARGUMENT && /at most 64 are accepted \(--max-descriptors\)/.test(error.details),
      )
      const entries = Array.from({ length: 33 }, (_, i) => [`k${i}`, 'v'] as [string, string])
      await assert.rejects(
        c.client.shouldRateLimit({ domain: 'basic', descriptors: [{ entries }] }),
        (error: grpc.ServiceError) => error.code === grpc.status.INVALID_ARGUMENT && /--max-descriptor-entries/.test(error.details),
      )
      const json = await fetch(`${c.service.httpUrl}/json`, {
        method: 'POST',
        body: JSON.stringify({
          domain: 'basic',
          descriptors: descriptors.map((d) => ({ entries: Object.entries(d.entries).map(([key, value]) => ({ key, value })) })),
        }),
      })
      assert.deepEqual([json.status, await json.text()], [400, 'Bad Request\n'])
      assert.match(json.headers.get('x-floodgate-reason') ?? '', /65 descriptors in one request; at most 64 are accepted/)
    })

    it('a 100,000-descriptor message is refused by size before it is decoded, and the server keeps answering', async () => {
      const bytes = encodeRequest({ domain: 'basic', descriptors: Array.from({ length: 100_000 }, (_, i) => desc({ key1: `v${i}` })) })
      await assert.rejects(c.client.raw(bytes), grpcError(grpc.status.RESOURCE_EXHAUSTED))
      assert.equal((await c.client.shouldRateLimit({ domain: 'basic', descriptors: [desc({ key1: unique('after') })] })).overall_code, 'OK')
    })

    // Abuse finding (1): a unit named like an Object.prototype member gave a 500 and a stack in the log.
    it('an override unit such as toString, __proto__, constructor or valueOf is a 400, not a 500', async () => {
      for (const unit of ['toString', '__proto__', 'constructor', 'valueOf']) {
        const response = await postJsonApi(c.service.httpUrl, {
          domain: 'basic',
          descriptors: [{ entries: [{ key: 'key1', value: 'x' }], limit: { requestsPerUnit: 1, unit } }],
        })
        assert.deepEqual([response.status, response.text], [400, 'Bad Request\n'], unit)
      }
      const week = await postJsonApi(c.service.httpUrl, {
        domain: 'basic',
        descriptors: [{ entries: [{ key: 'key1', value: unique('w') }], limit: { requestsPerUnit: 1, unit: 'WEEK' } }],
      })
      assert.equal(week.status, 200)
      assert.equal(week.json.statuses[0].currentLimit.unit, 'WEEK')
    })
  })
}
