// What is particular to each framework: Fastify route config and inject, Hono app.request, Express routes, hooks, several keys.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { createRequire } from 'node:module'
import express5 from 'express'
import express4 from 'express4'
import type { NextFunction, Request, Response } from 'express'
import Fastify from 'fastify'
import Koa from 'koa'
import { Hono } from 'hono'
import { createPolicies } from '../../src/core/policy.js'
import { RateLimiter } from '../../src/limiter/rate-limiter.js'
import { keys, rateLimit as expressRateLimit } from '../../src/express.js'
import { floodgate } from '../../src/fastify.js'
import { rateLimit as koaRateLimit } from '../../src/koa.js'
import { rateLimit as honoRateLimit, type RateLimitVariables } from '../../src/hono.js'
import { rateLimit as nodeRateLimit } from '../../src/node.js'

const requireModule = createRequire(import.meta.url)

function newLimiter(limit: number, name = 'burst'): RateLimiter {
  return new RateLimiter({ policies: [{ name, algorithm: 'sliding-log', limit, period: '1m' }], denyCache: false })
}

async function listen(handler: Parameters<typeof createServer>[1]) {
  const server = createServer(handler)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return {
    get: async (path: string, headers: Record<string, string> = {}) => {
      const response = await fetch(`${url}${path}`, { headers })
      return { status: response.status, text: await response.text(), headers: response.headers }
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

describe('fastify', () => {
  it('keys IPv6 peers by /56 straight from the socket (inject with remoteAddress)', async () => {
    const app = Fastify()
    await app.register(floodgate, { limiter: newLimiter(1) })
    app.get('/', async (request) => request.rateLimit?.remaining)
    const hit = (remoteAddress: string) => app.inject({ url: '/', remoteAddress })
    assert.equal((await hit('2001:db8:aa:bb01::1')).statusCode, 200)
    assert.equal((await hit('2001:db8:aa:bbff:ffff::2')).statusCode, 429)
    assert.equal((await hit('2001:db8:aa:bc00::1')).statusCode, 200)
    assert.equal((await hit('::ffff:192.0.2.1')).statusCode, 200)
    assert.equal((await hit('192.0.2.1')).statusCode, 429)
    await app.close()
  })

  it('per-route config overrides the plugin options or opts out', async () => {
    const app = Fastify()
    await app.register(floodgate, { limiter: newLimiter(100) })
    app.get('/login', { config: { rateLimit: { limiter: newLimiter(1, 'login'), body: 'problem' } } }, async () => 'ok')
    app.get('/health', { config: { rateLimit: false } }, async () => 'ok')
    app.get('/other', async () => 'ok')
    const login = [await app.inject('/login'), await app.inject('/login')]
    assert.deepEqual(
      login.map((r) => r.statusCode),
      [200, 429],
    )
    assert.match(String(login[1].headers['content-type']), /^application\/problem\+json/)
    assert.deepEqual(JSON.parse(login[1].body)['violated-policies'], ['login'])
    const health = await app.inject('/health')
    assert.equal(health.statusCode, 200)
    assert.equal(health.headers['x-ratelimit-limit'], undefined)
    assert.equal((await app.inject('/other')).headers['x-ratelimit-limit'], '100')
    await app.close()
  })

  // The README once showed `app.register(floodgate, { limiter })` without await: the plugin then
  // ran at ready(), after the routes below it, and limited none of them (200s, rateLimit null).
  it('limits the routes declared below app.register(...) whether or not it was awaited', async () => {
    for (const awaited of [true, false]) {
      const app = Fastify()
      const registering = app.register(floodgate, { limiter: newLimiter(1) })
      if (awaited) await registering
      app.get('/', async (request) => ({ remaining: request.rateLimit?.remaining }))
      app.get('/login', { config: { rateLimit: { limiter: newLimiter(2, 'login') } } }, async () => 'ok')
      app.get('/health', { config: { rateLimit: false } }, async () => 'ok')
      const first = await app.inject('/')
      assert.deepEqual([first.statusCode, JSON.parse(first.body)], [200, { remaining: 0 }], `awaited: ${awaited}`)
      assert.equal((await app.inject('/')).statusCode, 429, `awaited: ${awaited}`)
      const login = [await app.inject('/login'), await app.inject('/login'), await app.inject('/login')]
      assert.deepEqual(
        login.map((r) => r.statusCode),
        [200, 200, 429],
        `awaited: ${awaited}`,
      )
      assert.equal(login[0].headers['x-ratelimit-limit'], '2')
      const health = await app.inject('/health')
      assert.deepEqual([health.statusCode, health.headers['x-ratelimit-limit']], [200, undefined])
      await app.close()
    }
  })

  it('applies to child plugins registered after it, but not to not-found answers', async () => {
    const app = Fastify()
    app.register(floodgate, { limiter: newLimiter(1) })
    app.register(
      async (child) => {
        child.get('/child', async () => 'ok')
      },
      { prefix: '/v1' },
    )
    assert.deepEqual([(await app.inject('/v1/child')).statusCode, (await app.inject('/v1/child')).statusCode], [200, 429])
    const missing = await app.inject({ url: '/nowhere', remoteAddress: '192.0.2.9' })
    assert.deepEqual([missing.statusCode, missing.headers['x-ratelimit-limit']], [404, undefined])
    await app.close()
  })

  it('with global: false, only routes with config.rateLimit are limited', async () => {
    const app = Fastify()
    await app.register(floodgate, { global: false })
    app.get('/open', async () => 'ok')
    app.get('/limited', { config: { rateLimit: { limiter: newLimiter(1) } } }, async () => 'ok')
    assert.equal((await app.inject('/open')).headers['x-ratelimit-limit'], undefined)
    assert.deepEqual([(await app.inject('/limited')).statusCode, (await app.inject('/limited')).statusCode], [200, 429])
    await app.close()
  })

  it('a custom handler answers the denial; keys.route() sees the route pattern', async () => {
    const app = Fastify()
    await app.register(floodgate, {
      limiter: newLimiter(1),
      key: keys.route(),
      handler: (_request, reply, rejection) => reply.code(503).send({ slowDown: rejection.decision.retryAfterMs > 0 }),
    })
    app.get('/users/:id', async () => 'ok')
    assert.equal((await app.inject('/users/1')).statusCode, 200)
    const denied = await app.inject('/users/2')
    assert.equal(denied.statusCode, 503)
    assert.deepEqual(JSON.parse(denied.body), { slowDown: true })
    assert.ok(Number(denied.headers['retry-after']) >= 1)
    await app.close()
  })
})

describe('hono', () => {
  it('works with app.request and a remoteAddress function for runtimes without a node socket', async () => {
    const app = new Hono<{ Variables: RateLimitVariables }>()
    app.use(honoRateLimit({ limiter: newLimiter(1), remoteAddress: (c) => c.req.header('x-test-peer') }))
    app.get('/', (c) => c.json({ remaining: c.get('rateLimit')?.remaining }))
    const hit = (peer: string) => app.request('/', { headers: { 'x-test-peer': peer } })
    const first = await hit('2001:db8:1:100::1')
    assert.equal(first.status, 200)
    assert.deepEqual(await first.json(), { remaining: 0 })
    assert.equal(first.headers.get('x-ratelimit-remaining'), '0')
    assert.equal((await hit('2001:db8:1:1ff::2')).status, 429)
    assert.equal((await hit('2001:db8:1:200::1')).status, 200)
  })

  it('without any peer address the request passes and the error is reported', async () => {
    const errors: unknown[] = []
    const app = new Hono()
    app.use(honoRateLimit({ limiter: newLimiter(1), onError: (error) => errors.push(error) }))
    app.get('/', (c) => c.text('ok'))
    assert.equal((await app.request('/')).status, 200)
    assert.match(String(errors[0]), /client IP is unknown/)
  })

  it('a custom handler answers the denial', async () => {
    const app = new Hono()
    app.use(honoRateLimit({ limiter: newLimiter(0 + 1), remoteAddress: () => '192.0.2.1', handler: (c) => c.text('later', 429) }))
    app.get('/', (c) => c.text('ok'))
    await app.request('/')
    const denied = await app.request('/')
    assert.equal(denied.status, 429)
    assert.equal(await denied.text(), 'later')
    assert.ok(denied.headers.get('ratelimit'))
  })
})

// Express 5 and Express 4 (`express4`, npm:express@4) run the same middleware.
for (const [name, express, packageName, major] of [
  ['express', express5, 'express', '5'],
  ['express 4', express4, 'express4', '4'],
] as const) {
  describe(name, () => {
    it(`is Express ${major}`, () => {
      assert.equal(requireModule(`${packageName}/package.json`).version.split('.')[0], major)
    })

    it('as route middleware, keys.route() sees the route pattern with its mount path', async () => {
      const app = express()
      const router = express.Router()
      const limiter = newLimiter(1)
      const limit = expressRateLimit({ limiter, key: keys.combine(keys.ip(), keys.route()) })
      router.get('/users/:id', limit, (_req, res) => void res.send('ok'))
      app.use('/api', router)
      const server = await listen(app)
      try {
        // Two different paths, one pattern: one bucket.
        assert.equal((await server.get('/api/users/1')).status, 200)
        assert.equal((await server.get('/api/users/2?x=1')).status, 429)
        assert.equal((await limiter.get('ip:127.0.0.1|route:GET /api/users/:id')).remaining, 0)
      } finally {
        await server.close()
      }
    })

    it('a custom handler answers the denial, and its errors reach next(error)', async () => {
      const app = express()
      app.use(
        expressRateLimit({
          limiter: newLimiter(1),
          handler: (req, res, _next, rejection) => {
            if (req.query.explode !== undefined) throw new Error('handler exploded')
            res.status(429).json({ wait: rejection.decision.retryAfterMs > 0 })
          },
        }),
      )
      app.get('/', (_req, res) => void res.send('ok'))
      app.use((error: Error, _req: Request, res: Response, _next: NextFunction) => void res.status(500).send(error.message))
      const server = await listen(app)
      try {
        await server.get('/')
        assert.deepEqual(JSON.parse((await server.get('/')).text), { wait: true })
        const exploded = await server.get('/?explode')
        assert.deepEqual([exploded.status, exploded.text], [500, 'handler exploded'])
      } finally {
        await server.close()
      }
    })
  })
}

describe('koa', () => {
  it('sets ctx.state.rateLimit and lets a custom handler answer', async () => {
    const app = new Koa()
    app.use(
      koaRateLimit({
        limiter: newLimiter(1),
        handler: (ctx, rejection) => {
          ctx.status = 429
          ctx.body = `retry in ${rejection.decision.retryAfterMs > 0 ? 'a while' : 'no time'}`
        },
      }),
    )
    app.use((ctx) => {
      ctx.body = { policy: ctx.state.rateLimit.policy }
    })
    const server = await listen(app.callback())
    try {
      assert.deepEqual(JSON.parse((await server.get('/')).text), { policy: 'burst' })
      const denied = await server.get('/')
      assert.deepEqual([denied.status, denied.text], [429, 'retry in a while'])
    } finally {
      await server.close()
    }
  })
})

describe('node:http and the shared flow', () => {
  it('the check resolves whether to continue; several keys must all admit, and a denial refunds the others', async () => {
    const limiter = new RateLimiter({ denyCache: false })
    const perIp = createPolicies([{ name: 'per-ip', algorithm: 'sliding-log', limit: 10, period: '1m' }])
    const perUser = createPolicies([{ name: 'per-user', algorithm: 'sliding-log', limit: 2, period: '1m' }])
    const check = nodeRateLimit({
      limiter,
      key: (req) => [
        { key: `ip:${req.socket.remoteAddress}`, policies: perIp },
        { key: `user:${req.headers['x-user']}`, policies: perUser },
      ],
      cost: (req) => (req.url === '/bulk' ? 2 : 1),
    })
    const verdicts: boolean[] = []
    const server = await listen(async (req, res) => {
      const go = await check(req, res)
      verdicts.push(go)
      if (go) res.end('ok')
    })
    try {
      assert.equal((await server.get('/', { 'x-user': 'alice' })).status, 200)
      const denied = await server.get('/bulk', { 'x-user': 'alice' })
      assert.equal(denied.status, 429)
      assert.equal(JSON.parse(denied.text).policy, 'per-user')
      assert.equal(denied.headers.get('ratelimit-policy'), '"per-ip";q=10;w=60, "per-user";q=2;w=60')
      assert.deepEqual(verdicts, [true, false])
      // The per-IP key admitted /bulk but was refunded when per-user denied: 1 charged, 9 left.
      assert.equal((await limiter.get('ip:127.0.0.1', { policies: perIp })).remaining, 9)
      assert.equal((await server.get('/', { 'x-user': 'bob' })).status, 200)
    } finally {
      await server.close()
    }
  })

  it('shadow policies are decided and exposed, but kept out of the headers clients read', async () => {
    const limiter = new RateLimiter({
      policies: [
        { name: 'enforced', algorithm: 'sliding-log', limit: 5, period: '1m' },
        { name: 'trial', algorithm: 'sliding-log', limit: 1, period: '1m', shadow: true },
      ],
    })
    const check = nodeRateLimit({ limiter })
    const server = await listen(async (req, res) => {
      if (await check(req, res)) res.end(JSON.stringify({ shadow: req.rateLimit?.shadow }))
    })
    try {
      await server.get('/')
      const second = await server.get('/')
      assert.equal(second.status, 200)
      assert.deepEqual(JSON.parse(second.text), { shadow: true })
      assert.equal(second.headers.get('ratelimit-policy'), '"enforced";q=5;w=60')
      assert.equal(second.headers.get('x-ratelimit-remaining'), '3')
    } finally {
      await server.close()
    }
  })

  it('reads RFC 7239 Forwarded when told to, and ignores X-Forwarded-For then', async () => {
    const limiter = newLimiter(1)
    const check = nodeRateLimit({ limiter, trustProxy: ['loopback'], forwardedHeader: 'forwarded' })
    const server = await listen(async (req, res) => {
      if (await check(req, res)) res.end('ok')
    })
    try {
      const forwarded = { forwarded: 'for="[2001:db8:cafe::17]:4711";proto=https' }
      assert.equal((await server.get('/', forwarded)).status, 200)
      assert.equal((await server.get('/', { ...forwarded, 'x-forwarded-for': '198.51.100.1' })).status, 429)
      assert.equal((await limiter.get('ip:2001:db8:cafe::/56')).remaining, 0)
      assert.equal((await server.get('/', { 'x-forwarded-for': '198.51.100.1' })).status, 200)
    } finally {
      await server.close()
    }
  })
})
