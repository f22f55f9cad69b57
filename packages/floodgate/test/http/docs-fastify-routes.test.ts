// docs/middleware.md "Fastify: per-route options and global: false": only routes with
// config.rateLimit are limited, and a route's limiter replaces the plugin's.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { documented, kept } from './doc-snippet.js'

// snippet: fastify-routes
import Fastify from 'fastify'
import { RateLimiter } from 'floodgate'
import { floodgate } from 'floodgate/fastify'

const app = Fastify()
const general = new RateLimiter({ policies: [{ name: 'api', algorithm: 'gcra', limit: 100, period: '1m' }] })
const logins = new RateLimiter({ policies: [{ name: 'login', algorithm: 'fixed-window', limit: 5, period: '15m' }] })
await app.register(floodgate, { limiter: general, global: false })
app.get('/', async () => 'not limited') // no config.rateLimit
app.get('/search', { config: { rateLimit: {} } }, async () => 'the plugin options: 100 a minute')
app.post('/login', { config: { rateLimit: { limiter: logins } } }, async () => '5 per 15 minutes, and only that')
// end snippet

describe('docs/middleware.md: fastify-routes', () => {
  it('is the text of the docs', () => {
    assert.equal(kept('fastify-routes', 'docs-fastify-routes.test.ts'), documented('fastify-routes'))
  })

  it('leaves a route without config.rateLimit unlimited under global: false', async () => {
    const response = await app.inject({ url: '/' })
    assert.equal(response.statusCode, 200)
    assert.equal(response.headers['x-ratelimit-limit'], undefined)
  })

  it('limits a route with config.rateLimit: {} by the plugin options', async () => {
    const response = await app.inject({ url: '/search' })
    assert.equal(response.headers['x-ratelimit-limit'], '100')
  })

  it("decides a route with its own limiter by that limiter alone, not the plugin's as well", async () => {
    const remaining = async () => Number((await app.inject({ url: '/search' })).headers['x-ratelimit-remaining'])
    const before = await remaining()
    for (let i = 0; i < 5; i++) {
      const response = await app.inject({ method: 'POST', url: '/login' })
      assert.equal(response.statusCode, 200, `login ${i + 1}`)
      assert.equal(response.headers['x-ratelimit-limit'], '5')
    }
    assert.equal((await app.inject({ method: 'POST', url: '/login' })).statusCode, 429)
    // The plugin's limiter (same IP key) was not charged by the six logins: /search lost only its own
    // request (GCRA's refill can only add to what is left).
    assert.ok((await remaining()) >= before - 1, 'the logins did not count against the plugin limiter')
  })
})
