// The service under abuse, through its real HTTP and gRPC servers: long descriptor values become short
// store keys, and a flood of unique keys cannot evict (and so reset) a limited one.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { checkBody, postJson, rlsClients, startTestService, type TestService } from './helpers.js'

const TOKEN = 'abuse-admin-token'

describe('long descriptor values', () => {
  let service: TestService
  before(async () => {
    service = await startTestService(undefined, ['--admin-token', TOKEN])
  })
  after(async () => {
    await service.stop()
  })

  it('are hashed into short store keys; HTTP and gRPC share one counter for the same value', async () => {
    const long = 'v'.repeat(60_000)
    const url = `${service.httpUrl}/v1/check`
    for (let i = 0; i < 2; i++) assert.equal((await postJson(url, checkBody('test', [{ user: long }]))).status, 200)
    const grpc = rlsClients(service.grpcPort)
    try {
      const third = await grpc.shouldRateLimit({ domain: 'test', descriptors: [{ entries: [{ key: 'user', value: long }] }] })
      assert.equal(third.overall_code, 'OK')
      assert.equal(third.statuses[0].limit_remaining, 0)
      const fourth = await grpc.shouldRateLimit({ domain: 'test', descriptors: [{ entries: [{ key: 'user', value: long }] }] })
      assert.equal(fourth.overall_code, 'OVER_LIMIT')
    } finally {
      grpc.close()
    }
    assert.equal((await postJson(url, checkBody('test', [{ user: long }]))).status, 429)
    // Another long value has its own counter.
    assert.equal((await postJson(url, checkBody('test', [{ user: `${long}w` }]))).status, 200)
  })

  it('the admin peek shows the store key: 39 characters however long the value', async () => {
    const value = 'w'.repeat(1_000)
    await postJson(`${service.httpUrl}/v1/check`, checkBody('test', [{ user: value }]))
    const res = await fetch(`${service.httpUrl}/admin/keys?domain=test&descriptor=user=${value}`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    })
    const body = (await res.json()) as { storeKey: string; decision: { remaining: number } }
    assert.match(body.storeKey, /^sha256:[0-9a-f]{32}$/)
    assert.equal(body.decision.remaining, 2)
  })
})

describe('a flood of unique keys', () => {
  let service: TestService
  before(async () => {
    service = await startTestService(undefined, ['--memory-max-keys', '200'])
  })
  after(async () => {
    await service.stop()
  })

  it('does not reset a limited user, though it is ten times the store', { timeout: 120_000 }, async () => {
    const url = `${service.httpUrl}/v1/check`
    const victim = checkBody('test', [{ user: 'victim' }])
    for (let i = 0; i < 3; i++) assert.equal((await postJson(url, victim)).status, 200)
    assert.equal((await postJson(url, victim)).status, 429)
    for (let request = 0; request < 32; request++) {
      const users = Array.from({ length: 64 }, (_, i) => ({ user: `flood-${request}-${i}` }))
      assert.equal((await postJson(url, checkBody('test', users))).status, 200)
    }
    // Two hits, not one: the limiter's deny cache answers only the cost it remembers, so this one
    // reaches the store, which must still hold the victim's count.
    const after = await postJson(url, checkBody('test', [{ user: 'victim' }], 2))
    assert.equal(after.status, 429, 'the flood handed the victim a fresh limit')
    assert.equal(after.body.results[0].source, 'store')
    assert.equal(after.body.results[0].remaining, 0)
  })
})
