// The admin API: off without a token (404), 401 without the right bearer token, rules, peek and reset.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { checkBody, postJson, startTestService, type TestService } from './helpers.js'

const TOKEN = 'test-admin-token-123'

describe('admin API', () => {
  let service: TestService
  const auth = { authorization: `Bearer ${TOKEN}` }
  before(async () => {
    service = await startTestService(undefined, ['--admin-token', TOKEN])
  })
  after(async () => {
    await service.stop()
  })

  it('answers 401 without a token or with a wrong one', async () => {
    for (const headers of [{}, { authorization: 'Bearer wrong-token-xyz' }, { authorization: TOKEN }] as Record<string, string>[]) {
      const res = await fetch(`${service.httpUrl}/admin/rules`, { headers })
      assert.equal(res.status, 401)
      assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer/)
    }
    const reset = await postJson(`${service.httpUrl}/admin/keys/reset`, { domain: 'test', descriptor: [{ key: 'user', value: 'a' }] })
    assert.equal(reset.status, 401)
  })

  it('GET /admin/health shows what the public /readyz keeps back: rule files, failure mode, message', async () => {
    assert.equal((await fetch(`${service.httpUrl}/admin/health`)).status, 401)
    const res = await fetch(`${service.httpUrl}/admin/health`, { headers: auth })
    assert.equal(res.status, 200)
    const body = (await res.json()) as Record<string, unknown>
    assert.equal(body.status, 'ready')
    assert.equal(body.reason, 'ok')
    assert.equal(body.storeReachable, true)
    assert.equal(body.onStoreError, 'open')
    assert.deepEqual(body.rules, [service.rulesFile])
    assert.match(String(body.message), /rules loaded/)
  })

  it('GET /admin/rules describes the loaded rules', async () => {
    const res = await fetch(`${service.httpUrl}/admin/rules`, { headers: auth })
    assert.equal(res.status, 200)
    const body = (await res.json()) as { files: string[]; domains: { domain: string; descriptors: { key: string }[] }[] }
    assert.deepEqual(body.files, [service.rulesFile])
    assert.equal(body.domains[0].domain, 'test')
    assert.ok(body.domains[0].descriptors.some((d) => d.key === 'user'))
  })

  it('GET /admin/keys peeks without charging; DELETE and POST reset the counters', async () => {
    const check = () => postJson(`${service.httpUrl}/v1/check`, checkBody('test', [{ user: 'adm' }]))
    await check()
    await check()
    const peekUrl = `${service.httpUrl}/admin/keys?domain=test&descriptor=${encodeURIComponent('user=adm')}`
    for (let i = 0; i < 2; i++) {
      const peek = await fetch(peekUrl, { headers: auth })
      assert.equal(peek.status, 200)
      const body = (await peek.json()) as { rule: string; decision: { remaining: number; limit: number } }
      assert.equal(body.rule, 'test.user')
      assert.equal(body.decision.remaining, 1, 'peeking does not charge')
    }
    const deleted = await fetch(peekUrl, { method: 'DELETE', headers: auth })
    assert.equal(deleted.status, 200)
    assert.equal((await check()).body.results[0].remaining, 2)
    const reset = await postJson(
      `${service.httpUrl}/admin/keys/reset`,
      { domain: 'test', descriptor: [{ key: 'user', value: 'adm' }] },
      auth,
    )
    assert.equal(reset.status, 200)
    assert.equal((await check()).body.results[0].remaining, 2)
  })

  it('answers 404 for descriptors no limited rule matches and 400 for malformed queries', async () => {
    const unmatched = await fetch(`${service.httpUrl}/admin/keys?domain=test&descriptor=vip=x`, { headers: auth })
    assert.equal(unmatched.status, 404)
    const missing = await fetch(`${service.httpUrl}/admin/keys?domain=test`, { headers: auth })
    assert.equal(missing.status, 400)
    assert.match(((await missing.json()) as { message: string }).message, /descriptor/)
    const malformed = await fetch(`${service.httpUrl}/admin/keys?domain=test&descriptor=novalue`, { headers: auth })
    assert.equal(malformed.status, 400)
  })
})
