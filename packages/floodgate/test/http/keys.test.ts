// Key generators: IP, user (header or principal), hashed API key, route, and combinations.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { keys, type RequestInfo } from '../../src/http/keys.js'

function info(fields: Partial<Omit<RequestInfo, 'header'>> = {}, headers: Record<string, string> = {}): RequestInfo {
  return {
    ip: '203.0.113.9',
    method: 'GET',
    path: '/users/42',
    route: undefined,
    ...fields,
    header: (name) => headers[name.toLowerCase()],
  }
}

describe('key generators', () => {
  it('ip: the client address, or undefined when unknown', async () => {
    assert.equal(await keys.ip()(undefined, info()), 'ip:203.0.113.9')
    assert.equal(await keys.ip()(undefined, info({ ip: '2001:db8:1200::/56' })), 'ip:2001:db8:1200::/56')
    assert.equal(await keys.ip()(undefined, info({ ip: undefined })), undefined)
  })

  it('user: from a header or from the principal the framework exposes; absent means undefined', async () => {
    assert.equal(await keys.user('X-User-Id')(undefined, info({}, { 'x-user-id': 'alice' })), 'user:alice')
    assert.equal(await keys.user('x-user-id')(undefined, info({}, { 'x-user-id': '  ' })), undefined)
    const byPrincipal = keys.user((req: { user?: { id: number } }) => req.user?.id)
    assert.equal(await byPrincipal({ user: { id: 42 } }, info()), 'user:42')
    assert.equal(await byPrincipal({}, info()), undefined)
  })

  it('user: very long values are hashed so keys stay short', async () => {
    const key = (await keys.user('x-user-id')(undefined, info({}, { 'x-user-id': 'x'.repeat(10_000) })))!
    assert.match(key, /^user:sha256:[0-9a-f]{32}$/)
  })

  it('apiKey: a hash of the secret, never the secret itself', async () => {
    const key = (await keys.apiKey()(undefined, info({}, { 'x-api-key': 'sk_live_secret' })))!
    assert.match(key, /^apikey:[0-9a-f]{32}$/)
    assert.ok(!key.includes('secret'))
    assert.equal(await keys.apiKey()(undefined, info({}, { 'x-api-key': 'sk_live_secret' })), key)
    assert.notEqual(await keys.apiKey()(undefined, info({}, { 'x-api-key': 'sk_live_other' })), key)
    assert.equal(await keys.apiKey('authorization')(undefined, info()), undefined)
  })

  it('route: the method and the route pattern when known, else the path', async () => {
    assert.equal(await keys.route()(undefined, info()), 'route:GET /users/42')
    assert.equal(await keys.route()(undefined, info({ route: '/users/:id', method: 'POST' })), 'route:POST /users/:id')
  })

  it('combine: one key of several, undefined if any part is missing', async () => {
    const perIpPerRoute = keys.combine(keys.ip(), keys.route())
    assert.equal(await perIpPerRoute(undefined, info({ route: '/login' })), 'ip:203.0.113.9|route:GET /login')
    const perUserPerRoute = keys.combine(keys.user('x-user-id'), keys.route())
    assert.equal(await perUserPerRoute(undefined, info()), undefined)
  })
})
