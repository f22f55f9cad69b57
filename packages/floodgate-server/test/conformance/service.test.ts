// Conformance with envoyproxy/ratelimit's service behaviour (its test/service): overall codes, shadow
// and quota modes, unlimited, headers, dynamic metadata, errors and health — over gRPC with an
// official Envoy client and over /json, on the memory store and on a real redis-server.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import * as grpc from '@grpc/grpc-js'
import { Redis } from 'ioredis'
import { scrape } from '../service/helpers.js'
import { desc, postJsonApi, startConformance, STORES, unique, type Conformance } from './support.js'

const RULES = `
domain: svc
descriptors:
  - key: regular
    rate_limit: { unit: day, requests_per_unit: 2 }
    metadata: { name: service_1, nested: { a: 1 } }
  - key: quota
    quota_mode: true
    rate_limit: { unit: day, requests_per_unit: 1 }
    metadata: { name: service_2, nested: { a: 2, b: 2 } }
  - key: quota2
    quota_mode: true
    rate_limit: { unit: day, requests_per_unit: 1 }
  - key: shadow
    shadow_mode: true
    rate_limit: { unit: day, requests_per_unit: 1 }
  - key: shadow_quota
    shadow_mode: true
    quota_mode: true
    rate_limit: { unit: day, requests_per_unit: 1 }
  - key: free
    rate_limit: { unlimited: true }
  - key: shadow_policies
    shadow_mode: true
    limits:
      - { name: p, algorithm: sliding-window, limit: 1, period: 1h }
  - key: leased
    limits:
      - { name: l, algorithm: fixed-window, limit: 3, period: 1w, sync: lease }
`

const grpcError = (code: grpc.status) => (error: grpc.ServiceError) => error.code === code

for (const store of STORES) {
  describe(`conformance: service (upstream test/service), ${store} store`, () => {
    let c: Conformance
    before(async () => {
      c = await startConformance(store, RULES)
    })
    after(async () => {
      await c.stop()
    })
    const call = (descriptors: ReturnType<typeof desc>[]) => c.client.shouldRateLimit({ domain: 'svc', descriptors })

    it('TestService: statuses in request order; OVER_LIMIT overall once any descriptor is over', async () => {
      const value = unique('s')
      const first = await call([desc({ regular: value }), desc({ unknown: 'x' })])
      assert.equal(first.overall_code, 'OK')
      assert.deepEqual(
        first.statuses.map((s) => [s.code, s.limit_remaining, s.current_limit?.requests_per_unit ?? null]),
        [
          ['OK', 1, 2],
          ['OK', 0, null],
        ],
      )
      await call([desc({ regular: value })])
      const over = await call([desc({ unknown: 'x' }), desc({ regular: value })])
      assert.equal(over.overall_code, 'OVER_LIMIT')
      assert.deepEqual(
        over.statuses.map((s) => s.code),
        ['OK', 'OVER_LIMIT'],
      )
      assert.equal(over.statuses[1].limit_remaining, 0)
    })

    it('TestEmptyDomain: an empty domain is an error', async () => {
      await assert.rejects(
        c.client.shouldRateLimit({ domain: '', descriptors: [desc({ regular: 'x' })] }),
        grpcError(grpc.status.INVALID_ARGUMENT),
      )
      const json = await postJsonApi(c.service.httpUrl, { domain: '', descriptors: [{ entries: [{ key: 'regular', value: 'x' }] }] })
      assert.deepEqual([json.status, json.text], [400, 'Bad Request\n'])
    })

    it('TestEmptyDescriptors: no descriptors is an error', async () => {
      await assert.rejects(c.client.shouldRateLimit({ domain: 'svc', descriptors: [] }), grpcError(grpc.status.INVALID_ARGUMENT))
      const json = await postJsonApi(c.service.httpUrl, { domain: 'svc' })
      assert.equal(json.status, 400)
    })

    it('TestUnlimited: OK with limit_remaining 4294967295 and no current_limit, never counted', async () => {
      const response = await call([desc({ free: unique('f') }), desc({ regular: unique('r') })])
      assert.deepEqual(response.statuses[0], { code: 'OK', current_limit: null, limit_remaining: 4294967295, duration_until_reset: null })
      const json = await postJsonApi(c.service.httpUrl, { domain: 'svc', descriptors: [{ entries: [{ key: 'free', value: 'x' }] }] })
      assert.deepEqual(json.json.statuses[0], { code: 'OK', limitRemaining: 4294967295 })
    })

    it('TestRuleShadowMode: a shadow rule over its limit answers OK, remaining 0, and counts shadow_mode', async () => {
      const value = unique('sh')
      await call([desc({ shadow: value })])
      const over = await call([desc({ shadow: value })])
      assert.equal(over.overall_code, 'OK')
      assert.deepEqual([over.statuses[0].code, over.statuses[0].limit_remaining], ['OK', 0])
      assert.ok(((await scrape(c.service.httpUrl)).get('floodgate_shadow_mode{rule="svc.shadow"}') ?? 0) >= 1)
    })

    it('TestMixedRuleShadowMode: a regular descriptor over the limit still denies beside a shadow one', async () => {
      const value = unique('mix')
      await call([desc({ shadow: value }), desc({ regular: value })])
      await call([desc({ regular: value })])
      const response = await call([desc({ shadow: value }), desc({ regular: value })])
      assert.equal(response.overall_code, 'OVER_LIMIT')
      assert.deepEqual(
        response.statuses.map((s) => s.code),
        ['OK', 'OVER_LIMIT'],
      )
    })

    it('shadow mode on limits: policies: decided and counted on every store (never a store error)', async () => {
      const value = unique('sp')
      const before = (await scrape(c.service.httpUrl)).get('floodgate_shadow_mode{rule="svc.shadow_policies"}') ?? 0
      await call([desc({ shadow_policies: value })])
      const over = await call([desc({ shadow_policies: value })])
      assert.equal(over.overall_code, 'OK')
      const metrics = await scrape(c.service.httpUrl)
      assert.equal(metrics.get('floodgate_shadow_mode{rule="svc.shadow_policies"}'), before + 1)
      assert.equal(metrics.get('floodgate_store_errors_total'), 0)
    })

    it('sync: lease in limits: admits exactly the limit through leases, with no store error', async () => {
      const value = unique('lease')
      const codes: string[] = []
      for (let i = 0; i < 5; i++) codes.push((await call([desc({ leased: value })])).overall_code)
      assert.deepEqual(codes, ['OK', 'OK', 'OK', 'OVER_LIMIT', 'OVER_LIMIT'])
      assert.equal((await scrape(c.service.httpUrl)).get('floodgate_store_errors_total'), 0)
    })

    it('TestServicePerDescriptorQuotaMode: OVER_LIMIT when the only quota descriptor is over, beside a regular one within', async () => {
      const value = unique('q')
      await call([desc({ quota: value }), desc({ regular: value })])
      const response = await call([desc({ quota: value }), desc({ regular: value })])
      assert.equal(response.overall_code, 'OVER_LIMIT', 'every quota descriptor (there is one) is over')
      assert.deepEqual(
        response.statuses.map((s) => s.code),
        ['OVER_LIMIT', 'OK'],
      )
    })

    it('TestServiceMixedPerDescriptorModes: a regular descriptor over its limit denies whatever the quota ones say', async () => {
      const value = unique('mq')
      await call([desc({ regular: value })])
      await call([desc({ regular: value })])
      const response = await call([desc({ quota: value }), desc({ regular: value })])
      assert.equal(response.overall_code, 'OVER_LIMIT')
      assert.deepEqual(
        response.statuses.map((s) => s.code),
        ['OK', 'OVER_LIMIT'],
      )
    })

    it('TestServiceMixedPerDescriptorModesUnderLimit: everything within its limit answers OK', async () => {
      const value = unique('mu')
      const response = await call([desc({ quota: value }), desc({ regular: value })])
      assert.equal(response.overall_code, 'OK')
    })

    it('TestServiceQuotaModeOnlyAllOverTheLimit: OVER_LIMIT when every quota descriptor is over', async () => {
      const value = unique('qa')
      await call([desc({ quota: value }), desc({ quota2: value })])
      const response = await call([desc({ quota: value }), desc({ quota2: value })])
      assert.equal(response.overall_code, 'OVER_LIMIT')
    })

    it('TestServiceQuotaModeOnlySomeOverTheLimit: OK while some quota descriptor is within', async () => {
      const value = unique('qs')
      await call([desc({ quota: value })])
      const response = await call([desc({ quota: value }), desc({ quota2: value })])
      assert.equal(response.overall_code, 'OK')
      assert.deepEqual(
        response.statuses.map((s) => s.code),
        ['OVER_LIMIT', 'OK'],
      )
    })

    it('TestServiceQuotaModeWithShadowMode: a shadow quota descriptor over its limit answers OK', async () => {
      const value = unique('qsh')
      await call([desc({ shadow_quota: value })])
      const response = await call([desc({ shadow_quota: value })])
      assert.equal(response.overall_code, 'OK')
      assert.equal(response.statuses[0].code, 'OK')
    })

    it('TestServiceMixedModeWithShadowMode: shadow, quota and regular together', async () => {
      const value = unique('msh')
      await call([desc({ shadow: value }), desc({ quota: value })])
      const response = await call([desc({ shadow: value }), desc({ quota: value }), desc({ regular: value })])
      assert.equal(response.overall_code, 'OVER_LIMIT', 'the only quota descriptor is over')
      assert.deepEqual(
        response.statuses.map((s) => s.code),
        ['OK', 'OVER_LIMIT', 'OK'],
      )
    })

    it('TestServiceHealthStatus: gRPC health is SERVING for "" and "ratelimit"; /healthcheck says OK', async () => {
      assert.equal((await c.health.healthCheck('')).status, 'SERVING')
      assert.equal((await c.health.healthCheck('ratelimit')).status, 'SERVING')
      const response = await fetch(`${c.service.httpUrl}/healthcheck`)
      assert.deepEqual([response.status, await response.text()], [200, 'OK'])
    })
  })

  describe(`conformance: service options (SHADOW_MODE, QUOTA_MODE, headers, dynamic metadata), ${store} store`, () => {
    it('TestServiceGlobalShadowMode: the overall code is OK even with a descriptor over its limit', async () => {
      const c = await startConformance(store, RULES, ['--shadow-mode', '--upstream-metrics'])
      try {
        const value = unique('gs')
        for (let i = 0; i < 2; i++) await c.client.shouldRateLimit({ domain: 'svc', descriptors: [desc({ regular: value })] })
        const response = await c.client.shouldRateLimit({ domain: 'svc', descriptors: [desc({ regular: value })] })
        assert.equal(response.overall_code, 'OK')
        assert.equal(response.statuses[0].code, 'OVER_LIMIT')
        assert.equal((await scrape(c.service.httpUrl)).get('ratelimit_service_global_shadow_mode'), 1)
      } finally {
        await c.stop()
      }
    })

    it("TestServiceGlobalQuotaMode, TestMetadataReturnedForPassedDescriptors: passed rules' metadata, the first value wins", async () => {
      const c = await startConformance(store, RULES, ['--quota-mode', '--response-dynamic-metadata'])
      try {
        const value = unique('gq')
        await c.client.shouldRateLimit({ domain: 'svc', descriptors: [desc({ quota: value })] })
        const response = await c.client.shouldRateLimit({
          domain: 'svc',
          descriptors: [desc({ regular: value }), desc({ quota: value })],
          hits_addend: 1,
        })
        assert.equal(response.overall_code, 'OK', 'every descriptor is a quota one, and one is within')
        const metadata = structToJson(response.dynamic_metadata)
        assert.equal(metadata.domain, 'svc')
        assert.deepEqual(metadata.descriptors, [{ entries: [`regular=${value}`] }, { entries: [`quota=${value}`] }])
        assert.equal(metadata.hitsAddend, 1)
        assert.deepEqual(metadata.metadata, { name: 'service_1', nested: { a: 1 } }, "only the passed descriptor's metadata")
        const both = await c.client.shouldRateLimit({
          domain: 'svc',
          descriptors: [desc({ regular: unique('a') }), desc({ quota: unique('b') })],
        })
        // TestOverlappingMetadataReturnsTheFirstValue / TestMetadataReturnedForAllPassedDescriptors
        assert.deepEqual(structToJson(both.dynamic_metadata).metadata, { name: 'service_1', nested: { a: 1, b: 2 } })
        const json = await postJsonApi(c.service.httpUrl, {
          domain: 'svc',
          descriptors: [{ entries: [{ key: 'regular', value: unique('j') }] }],
        })
        assert.deepEqual(json.json.dynamicMetadata.metadata, { name: 'service_1', nested: { a: 1 } })
      } finally {
        await c.stop()
      }
    })

    it('TestServiceWithDefaultRatelimitHeaders: RateLimit-Limit/-Remaining/-Reset of the tightest descriptor', async () => {
      const c = await startConformance(store, RULES, ['--grpc-response-headers'])
      try {
        const value = unique('h')
        const started = Date.now()
        const response = await c.client.shouldRateLimit({
          domain: 'svc',
          descriptors: [desc({ regular: value }), desc({ quota: value }), desc({ free: value })],
        })
        const headers = Object.fromEntries(response.response_headers_to_add.map((h) => [h.key, h.value]))
        assert.equal(headers['RateLimit-Limit'], '1', 'the quota descriptor has the least remaining (0)')
        assert.equal(headers['RateLimit-Remaining'], '0')
        const day = 86_400
        assert.ok(
          [day - (Math.floor(started / 1000) % day), day - (Math.floor(Date.now() / 1000) % day)].includes(
            Number(headers['RateLimit-Reset']),
          ),
        )
        const json = await postJsonApi(c.service.httpUrl, {
          domain: 'svc',
          descriptors: [{ entries: [{ key: 'regular', value: unique('j') }] }],
        })
        assert.deepEqual(
          json.json.responseHeadersToAdd.map((h: { key: string }) => h.key),
          ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'],
        )
      } finally {
        await c.stop()
      }
    })

    it('TestServiceWithCustomRatelimitHeaders: LIMIT_*_HEADER names; an over-limit descriptor speaks', async () => {
      const c = await startConformance(store, RULES, [
        '--grpc-response-headers',
        '--limit-header',
        'A-Limit',
        '--remaining-header',
        'A-Remaining',
        '--reset-header',
        'A-Reset',
      ])
      try {
        const value = unique('ch')
        for (let i = 0; i < 2; i++) await c.client.shouldRateLimit({ domain: 'svc', descriptors: [desc({ regular: value })] })
        const response = await c.client.shouldRateLimit({
          domain: 'svc',
          descriptors: [desc({ quota2: unique('q') }), desc({ regular: value })],
        })
        assert.deepEqual(response.response_headers_to_add.map((h) => [h.key, h.value]).slice(0, 2), [
          ['A-Limit', '2'],
          ['A-Remaining', '0'],
        ])
      } finally {
        await c.stop()
      }
    })
  })
}

describe('conformance: service, store errors (redis store)', () => {
  it('TestCacheError: the store not answering is an error (UNAVAILABLE; /json 400), not a silent OK', async () => {
    const c = await startConformance('redis', RULES, ['--store-timeout', '200ms'])
    try {
      assert.equal((await c.client.shouldRateLimit({ domain: 'svc', descriptors: [desc({ regular: unique('e') })] })).overall_code, 'OK')
      await c.redis!.stop()
      await assert.rejects(
        c.client.shouldRateLimit({ domain: 'svc', descriptors: [desc({ regular: unique('e') })] }),
        grpcError(grpc.status.UNAVAILABLE),
      )
      const json = await postJsonApi(c.service.httpUrl, { domain: 'svc', descriptors: [{ entries: [{ key: 'regular', value: 'x' }] }] })
      assert.deepEqual([json.status, json.text], [400, 'Bad Request\n'])
      // Unmatched and unlimited descriptors never need the store.
      assert.equal((await c.client.shouldRateLimit({ domain: 'svc', descriptors: [desc({ free: 'x' })] })).overall_code, 'OK')
    } finally {
      await c.stop()
    }
  })

  it('TestCacheError: a store slower than --store-timeout is an error too, never an OK with the full limit', async () => {
    const c = await startConformance('redis', RULES, ['--store-timeout', '200ms'])
    const admin = new Redis(c.redis!.port, c.redis!.host, { lazyConnect: true, maxRetriesPerRequest: 0 })
    try {
      await admin.connect()
      // The server holds every command for 5 s: far past the 200 ms deadline however busy the machine is.
      await admin.call('CLIENT', 'PAUSE', '5000', 'ALL')
      await assert.rejects(
        c.client.shouldRateLimit({ domain: 'svc', descriptors: [desc({ regular: unique('slow') })] }),
        grpcError(grpc.status.UNAVAILABLE),
      )
    } finally {
      admin.disconnect()
      await c.stop()
    }
  })

  it('--on-store-error open is an explicit choice: the store not answering is then OK', async () => {
    const c = await startConformance('redis', RULES, ['--store-timeout', '200ms', '--on-store-error', 'open'])
    try {
      await c.redis!.stop()
      assert.equal((await c.client.shouldRateLimit({ domain: 'svc', descriptors: [desc({ regular: unique('o') })] })).overall_code, 'OK')
    } finally {
      await c.stop()
    }
  })
})

/** A decoded google.protobuf.Struct as plain JSON. */
function structToJson(struct: { fields: Record<string, unknown> } | null): Record<string, any> {
  // Decoded with `oneofs: true`: `kind` names the member of google.protobuf.Value that is set
  // (snake_case or camelCase, as the loaded definition of the well-known type spells it).
  const value = (v: any): unknown => {
    const member = v[v.kind]
    if (/^struct/.test(v.kind)) return structToJson(member)
    if (/^list/.test(v.kind)) return (member.values ?? []).map(value)
    if (/^null/.test(v.kind)) return null
    return member
  }
  return Object.fromEntries(Object.entries(struct?.fields ?? {}).map(([k, v]) => [k, value(v)]))
}
