// The HTTP API through a real socket on the embedded store: /v1/check, Envoy /json and /healthcheck, probes, errors.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { checkBody, postJson, startTestService, type TestService } from './helpers.js'

describe('HTTP API (memory store)', () => {
  let service: TestService
  before(async () => {
    service = await startTestService()
  })
  after(async () => {
    await service.stop()
  })

  it('POST /v1/check answers 200 until the limit, then 429 with RateLimit headers and Retry-After', async () => {
    const url = `${service.httpUrl}/v1/check`
    const body = checkBody('test', [{ user: 'alice' }])
    for (let i = 0; i < 3; i++) {
      const res = await postJson(url, body)
      assert.equal(res.status, 200)
      assert.equal(res.body.allowed, true)
      assert.equal(res.body.results[0].remaining, 2 - i)
      assert.equal(res.body.results[0].limit, 3)
      assert.equal(res.body.results[0].rule, 'test.user')
      assert.equal(res.headers.get('x-ratelimit-remaining'), String(2 - i))
    }
    const denied = await postJson(url, body)
    assert.equal(denied.status, 429)
    assert.equal(denied.body.allowed, false)
    assert.equal(denied.body.results[0].allowed, false)
    assert.ok(denied.body.retryAfterMs > 0)
    assert.ok(Number(denied.headers.get('retry-after')) >= 1)
    assert.match(denied.headers.get('ratelimit-policy') ?? '', /;q=3;w=86400/)
    assert.match(denied.headers.get('ratelimit') ?? '', /;r=0;t=\d+/)
    // Another user has its own counter.
    assert.equal((await postJson(url, checkBody('test', [{ user: 'bob' }]))).status, 200)
  })

  it('hits above what the rule could ever admit: 429 saying never, retryAfterMs 0, no Retry-After', async () => {
    const url = `${service.httpUrl}/v1/check`
    for (const descriptor of [{ user: 'greedy' }, { burst: 'greedy' }, { fast: 'greedy' }] as Record<string, string>[]) {
      const res = await postJson(url, checkBody('test', [descriptor, { vip: 'v' }], 4))
      assert.equal(res.status, 429)
      assert.equal(res.body.never, true)
      assert.equal(res.body.retryAfterMs, 0)
      assert.equal(res.body.results[0].never, true)
      assert.equal(res.body.results[0].retryAfterMs, 0)
      assert.equal(res.body.results[1].never, undefined)
      assert.equal(res.headers.get('retry-after'), null)
      const after = await postJson(url, checkBody('test', [descriptor], 0))
      // `user` is an envoyproxy/ratelimit rule: every hit counts, as upstream's INCRBY does.
      // `burst` and `fast` are `limits:` policies: a denied request charges nothing.
      const upstreamRule = 'user' in descriptor
      assert.equal(after.body.results[0].remaining, upstreamRule ? 0 : after.body.results[0].limit)
    }
  })

  it('answers each descriptor in order: limited, unlimited, unmatched; hits 0 only checks', async () => {
    const url = `${service.httpUrl}/v1/check`
    const res = await postJson(url, checkBody('test', [{ user: 'carol' }, { vip: 'x' }, { nothing: 'here' }], 0))
    assert.equal(res.status, 200)
    assert.deepEqual(res.body.results[1], { allowed: true, rule: 'test.vip', unlimited: true })
    assert.deepEqual(res.body.results[2], { allowed: true, rule: null })
    assert.equal(res.body.results[0].remaining, 3, 'hits 0 charges nothing')
    const charged = await postJson(url, checkBody('test', [{ user: 'carol' }], 2))
    assert.equal(charged.body.results[0].remaining, 1)
    const tooMany = await postJson(url, checkBody('test', [{ user: 'carol' }], 2))
    assert.equal(tooMany.status, 429)
    assert.equal((await postJson(url, checkBody('nodomain', [{ user: 'carol' }]))).body.results[0].rule, null)
  })

  it('shadow-mode rules answer allowed but report that they would deny', async () => {
    const url = `${service.httpUrl}/v1/check`
    const body = checkBody('test', [{ trial: 't1' }])
    assert.equal((await postJson(url, body)).status, 200)
    const second = await postJson(url, body)
    assert.equal(second.status, 200)
    assert.equal(second.body.results[0].allowed, true)
    assert.equal(second.body.results[0].wouldDeny, true)
    assert.equal(second.body.results[0].shadow, true)
    assert.equal(second.headers.get('retry-after'), null)
  })

  it('POST /json answers like envoyproxy/ratelimit (protobuf JSON, 200 then 429)', async () => {
    const url = `${service.httpUrl}/json`
    const request = {
      domain: 'test',
      descriptors: [{ entries: [{ key: 'user', value: 'dave' }] }, { entries: [{ key: 'vip', value: 'v' }] }],
    }
    const first = await postJson(url, request)
    assert.equal(first.status, 200)
    assert.equal(first.body.overallCode, 'OK')
    assert.deepEqual(first.body.statuses[0].currentLimit, { requestsPerUnit: 3, unit: 'DAY' })
    assert.equal(first.body.statuses[0].limitRemaining, 2)
    assert.match(first.body.statuses[0].durationUntilReset, /^\d+(\.\d+)?s$/)
    assert.deepEqual(first.body.statuses[1], { code: 'OK', limitRemaining: 4294967295 }, 'unlimited, as upstream')
    // hits_addend in snake_case, as protojson also accepts
    const rest = await postJson(url, { ...request, hits_addend: 2 })
    assert.equal(rest.status, 200)
    assert.equal(rest.body.statuses[0].limitRemaining, undefined, 'zero is omitted as in protojson')
    const over = await postJson(url, request)
    assert.equal(over.status, 429)
    assert.equal(over.body.overallCode, 'OVER_LIMIT')
    assert.equal(over.body.statuses[0].code, 'OVER_LIMIT')
  })

  it('GET /healthcheck, /healthz and /readyz report health', async () => {
    const healthcheck = await fetch(`${service.httpUrl}/healthcheck`)
    assert.equal(healthcheck.status, 200)
    assert.equal(await healthcheck.text(), 'OK')
    assert.deepEqual(await (await fetch(`${service.httpUrl}/healthz`)).json(), { status: 'alive' })
    const ready = await fetch(`${service.httpUrl}/readyz`)
    assert.equal(ready.status, 200)
    // Public: a status and a reason code, never the rule files' paths or other internals.
    const text = await ready.text()
    assert.deepEqual(JSON.parse(text), { status: 'ready', reason: 'ok' })
    assert.ok(!text.includes(service.dir), text)
  })

  it('rejects malformed and wrong-shaped bodies with 400 and a reason, never crashing', async () => {
    const url = `${service.httpUrl}/v1/check`
    const cases: [unknown, RegExp][] = [
      ['{"domain": "test", ', /not valid JSON/],
      [{ descriptors: [[{ key: 'user', value: 'a' }]] }, /^domain: /],
      [{ domain: '', descriptors: [[{ key: 'user', value: 'a' }]] }, /^domain: must not be empty/],
      [{ domain: 'test', descriptors: [] }, /^descriptors: give at least one/],
      [{ domain: 'test', descriptors: [[]] }, /^descriptors\.0: a descriptor needs at least one entry/],
      [{ domain: 'test', descriptors: [[{ key: 'user' }]] }, /^descriptors\.0\.0\.value: expected a string/],
      [{ domain: 'test', descriptors: [[{ key: 'user', value: 'a' }]], hits: -1 }, /^hits: /],
      [{ domain: 'test', descriptors: [[{ key: 'user', value: 'a' }]], hits: 1.5 }, /^hits: /],
      [{ domain: 'test', descriptors: [[{ key: 'user', value: 'a' }]], extra: 1 }, /^body: unknown field "extra"/],
      [[1, 2], /^body: /],
      ['null', /^body: /],
    ]
    for (const [body, reason] of cases) {
      const res = await postJson(url, body)
      assert.equal(res.status, 400, `${JSON.stringify(body)} → ${JSON.stringify(res.body)}`)
      assert.equal(res.body.error, 'bad_request')
      assert.match(res.body.message, reason, JSON.stringify(body))
    }
    // /json answers errors as upstream does: 400 and Go's plain-text status line.
    const json = await postJson(`${service.httpUrl}/json`, { domain: '', descriptors: [] })
    assert.equal(json.status, 400)
    assert.equal(json.body, 'Bad Request\n')
  })

  it("reads fetch's default text/plain body (and curl -d's form type) as JSON on /v1/check, as on /json", async () => {
    const body = JSON.stringify(checkBody('test', [{ user: 'plain-text' }]))
    // fetch with a string body and no headers sends content-type text/plain;charset=UTF-8.
    const plain = await fetch(`${service.httpUrl}/v1/check`, { method: 'POST', body })
    const answer = (await plain.json()) as { allowed: boolean; results: { rule: string; remaining: number }[] }
    assert.equal(plain.status, 200, JSON.stringify(answer))
    assert.equal(answer.results[0].rule, 'test.user')
    assert.equal(answer.results[0].remaining, 2)
    const form = await postJson(`${service.httpUrl}/v1/check`, body, { 'content-type': 'application/x-www-form-urlencoded' })
    assert.equal(form.status, 200, JSON.stringify(form.body))
    assert.equal(form.body.results[0].remaining, 1, 'the same counter: both were charged')
    const broken = await fetch(`${service.httpUrl}/v1/check`, { method: 'POST', body: '{"domain": ' })
    assert.equal(broken.status, 400)
    assert.match(((await broken.json()) as { message: string }).message, /^body: not valid JSON/)
    const envoy = await fetch(`${service.httpUrl}/json`, {
      method: 'POST',
      body: JSON.stringify({ domain: 'test', descriptors: [{ entries: [{ key: 'user', value: 'plain-json' }] }] }),
    })
    assert.equal(envoy.status, 200)
  })

  it('answers 413 for oversized bodies and 404 for unknown routes', async () => {
    const huge = JSON.stringify(checkBody('test', [{ user: 'x'.repeat(70_000) }]))
    const res = await postJson(`${service.httpUrl}/v1/check`, huge)
    assert.equal(res.status, 413)
    assert.equal(res.body.error, 'payload_too_large')
    const missing = await fetch(`${service.httpUrl}/nope`)
    assert.equal(missing.status, 404)
    assert.equal(((await missing.json()) as { error: string }).error, 'not_found')
    assert.equal((await fetch(`${service.httpUrl}/v1/check`)).status, 404, 'GET is not routed')
    assert.equal((await fetch(`${service.httpUrl}/admin/rules`)).status, 404, 'admin is off without a token')
  })
})
