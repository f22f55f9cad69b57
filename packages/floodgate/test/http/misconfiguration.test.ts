// A new user's mistakes are refused loudly, naming what to change, instead of limiting nothing:
// other limiters' option names, a limiter without policies, a key of the wrong type, and the
// middleware factory used as the middleware. Real frameworks on real listeners.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { createServer, type RequestListener } from 'node:http'
import type { AddressInfo } from 'node:net'
import express5 from 'express'
import express4 from 'express4'
import type { NextFunction, Request, Response } from 'express'
import Fastify from 'fastify'
import Koa from 'koa'
import { Hono } from 'hono'
import { FloodgateError } from '../../src/core/errors.js'
import { RateLimiter } from '../../src/limiter/rate-limiter.js'
import { keys, rateLimit as expressRateLimit } from '../../src/express.js'
import { floodgate } from '../../src/fastify.js'
import { rateLimit as koaRateLimit } from '../../src/koa.js'
import { rateLimit as honoRateLimit } from '../../src/hono.js'
import { rateLimit as nodeRateLimit, withRateLimit } from '../../src/node.js'

const limiter = new RateLimiter({ policies: [{ algorithm: 'fixed-window', limit: 10, period: '1m' }] })
const factories = { express: expressRateLimit, koa: koaRateLimit, hono: honoRateLimit, node: nodeRateLimit } as Record<
  string,
  (options: object) => unknown
>

function refused(action: () => unknown, message: RegExp): void {
  assert.throws(action, (error: unknown) => {
    assert.ok(error instanceof FloodgateError, `expected a FloodgateError, got ${String(error)}`)
    assert.equal(error.code, 'INVALID_OPTION')
    assert.match(error.message, message)
    return true
  })
}

async function get(listener: RequestListener, path = '/'): Promise<{ status: number; text: string }> {
  const server = createServer(listener)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  try {
    const response = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}${path}`)
    return { status: response.status, text: await response.text() }
  } finally {
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }
}

/** Catches process warnings of one code while `action` runs. */
async function warningsDuring(code: string, action: () => Promise<void>): Promise<string[]> {
  const seen: string[] = []
  const listen = (warning: Error & { code?: string }) => void (warning.code === code && seen.push(warning.message))
  process.on('warning', listen)
  try {
    await action()
    // Warnings are emitted on the next tick.
    await new Promise((resolve) => setImmediate(resolve))
  } finally {
    process.off('warning', listen)
  }
  return seen
}

/** A pattern for a message that starts with `text`, read literally. */
function startsWith(text: string): RegExp {
  return new RegExp(`^${text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`)
}

describe('option names from other rate limiters', () => {
  const cases: [string, unknown, RegExp][] = [
    [
      'windowMs',
      15 * 60_000,
      startsWith(
        "windowMs: unknown option: the window is a policy's period, on the limiter: " +
          "new RateLimiter({ policies: [{ algorithm: 'fixed-window', limit: 100, period: '15m' }] })",
      ),
    ],
    ['max', 100, /^max: unknown option: the limit belongs to a policy, on the limiter/],
    ['limit', 100, /^limit: unknown option: the limit belongs to a policy, on the limiter/],
    ['timeWindow', '1 minute', /^timeWindow: unknown option: the window is a policy's period/],
    ['standardHeaders', 'draft-7', /^standardHeaders: unknown option: use headers: 'draft-8'/],
    ['legacyHeaders', false, /^legacyHeaders: unknown option: use headers: list 'legacy'/],
    ['keyGenerator', () => 'k', /^keyGenerator: unknown option: use key: \(req, info\) => string/],
    ['message', 'Too many requests', /^message: unknown option: use handler to answer a denial yourself, or body/],
    ['statusCode', 503, /^statusCode: unknown option: use handler to answer a denial with another status/],
    ['allowList', ['127.0.0.1'], /^allowList: unknown option: use skip: \(req\) => boolean/],
    ['store', {}, /^store: unknown option: the store belongs to the limiter: new RateLimiter\(\{ store/],
    ['skipOnError', true, /^skipOnError: unknown option: use the limiter's onStoreError/],
  ]
  for (const [name, factory] of Object.entries(factories)) {
    it(`${name}: each gets "unknown option" and the Floodgate option to use instead`, () => {
      for (const [field, value, message] of cases) refused(() => factory({ limiter, [field]: value }), message)
      // A name we have no advice for still lists the real options.
      refused(() => factory({ limiter, keyGen: () => 'k' }), /^keyGen: unknown option; known options are limiter, key, cost, skip/)
    })
  }

  it('fastify: at ready(), with the hint', async () => {
    const app = Fastify()
    app.register(floodgate, { limiter, max: 100, timeWindow: '1 minute' } as never)
    await assert.rejects(async () => void (await app.ready()), /^FloodgateError: max: unknown option: the limit belongs to a policy/)
    await app.close()
  })
})

describe('a limiter without policies', () => {
  const bare = new RateLimiter()

  it('is refused at setup when neither it nor the key brings policies', () => {
    for (const factory of Object.values(factories)) {
      refused(
        () => factory({ limiter: bare }),
        startsWith(
          'limiter: this RateLimiter has no policies, and the default key (the client IP) brings none, ' +
            'so nothing could be limited: create it with some, e.g. new RateLimiter({ policies:',
        ),
      )
      refused(
        () => factory({ limiter: bare, key: keys.combine(keys.ip(), keys.user('x-user-id')) }),
        /^limiter: this RateLimiter has no policies, and this key brings none/,
      )
    }
  })

  it('fastify: at ready()', async () => {
    const app = Fastify()
    app.register(floodgate, { limiter: bare })
    await assert.rejects(async () => void (await app.ready()), /^FloodgateError: limiter: this RateLimiter has no policies/)
    await app.close()
  })

  it('with a key function of its own, a part without policies fails the request instead of passing it', async () => {
    const errors: unknown[] = []
    const app = express5()
    app.use(expressRateLimit({ limiter: bare, key: () => 'user:1' }))
    app.get('/', (_req, res) => void res.send('not limited'))
    app.use((error: unknown, _req: Request, res: Response, _next: NextFunction) => {
      errors.push(error)
      res.status(500).send('error handler')
    })
    assert.deepEqual(await get(app), { status: 500, text: 'error handler' })
    assert.match(String(errors[0]), /limiter: this RateLimiter has no policies and a key part brought none/)
  })
})

describe('the key option', () => {
  it('refuses a header name or an uncalled keys.* factory at setup', () => {
    for (const factory of Object.values(factories)) {
      refused(
        () => factory({ limiter, key: 'x-user-id' }),
        startsWith(
          'key: must be a function (req, info) => key of the request, got the string "x-user-id"; ' +
            'to key by a header write keys.user("x-user-id")',
        ),
      )
      refused(() => factory({ limiter, key: 42 }), /^key: must be a function .*, got the number 42$/)
      refused(() => factory({ limiter, key: keys.ip }), /^key: keys\.ip makes a key function; call it: key: keys\.ip\(\)$/)
      refused(() => factory({ limiter, key: keys.user }), /^key: keys\.user makes a key function; call it: key: keys\.user\(…\)$/)
    }
  })

  // req.user.id is often a number: the request used to pass unlimited with a cryptic warning.
  const returnsNumber =
    /^key: the key function returned the number 42; return a string \(e\.g\. `user:\$\{id\}`, or String\(id\) for a number\)/

  for (const [name, createApp] of [
    ['express 5', express5],
    ['express 4', express4],
  ] as const) {
    it(`${name}: a key function returning a number reaches the error handler, not the route`, async () => {
      const errors: unknown[] = []
      const app = createApp()
      app.use(expressRateLimit({ limiter, key: () => 42 as unknown as string }))
      app.get('/', (_req, res) => void res.send('not limited'))
      app.use((error: unknown, _req: Request, res: Response, _next: NextFunction) => {
        errors.push(error)
        res.status(500).send('error handler')
      })
      assert.deepEqual(await get(app as unknown as RequestListener), { status: 500, text: 'error handler' })
      assert.match((errors[0] as Error).message, returnsNumber)
    })
  }

  it('koa: thrown to Koa (a 500 and its error event)', async () => {
    const errors: Error[] = []
    const app = new Koa()
    app.on('error', (error: Error) => errors.push(error))
    app.use(koaRateLimit({ limiter, key: () => 42 as unknown as string }))
    app.use((ctx) => void (ctx.body = 'not limited'))
    assert.equal((await get(app.callback())).status, 500)
    assert.match(errors[0].message, returnsNumber)
  })

  it('hono: thrown to onError', async () => {
    const errors: Error[] = []
    const app = new Hono()
    app.onError((error, c) => {
      errors.push(error)
      return c.text('error handler', 500)
    })
    app.use(honoRateLimit({ limiter, key: () => [{ key: 7 }] as never, remoteAddress: () => '192.0.2.1' }))
    app.get('/', (c) => c.text('not limited'))
    assert.equal((await app.request('/')).status, 500)
    assert.match(errors[0].message, /^key: the key function returned a part whose key is the number 7/)
  })

  it('fastify: a 500 naming the mistake', async () => {
    const app = Fastify()
    await app.register(floodgate, { limiter, key: () => ({ key: 'user:1' }) as never })
    app.get('/', async () => 'not limited')
    const response = await app.inject('/')
    assert.equal(response.statusCode, 500)
    assert.match(JSON.parse(response.body).message, /^key: the key function returned an object; return a string/)
    await app.close()
  })

  it('node:http: answered with a 500 (a throw would end the process) and warned once', async () => {
    const check = nodeRateLimit({ limiter, key: () => 42 as unknown as string })
    const listener: RequestListener = async (req, res) => {
      if (await check(req, res)) res.end('not limited')
    }
    const warnings = await warningsDuring('FG_MISCONFIGURED', async () => {
      assert.deepEqual(await get(listener), { status: 500, text: 'rate limiting is misconfigured; the server log says what to change\n' })
      assert.equal((await get(listener)).status, 500)
    })
    assert.equal(warnings.length, 1)
    assert.match(warnings[0], returnsNumber)
  })

  it('null is undefined (keyed by client IP), not an error', async () => {
    const app = Fastify()
    await app.register(floodgate, { limiter, key: () => null as never })
    app.get('/', async () => 'ok')
    const response = await app.inject({ url: '/', remoteAddress: '192.0.2.44' })
    assert.deepEqual([response.statusCode, response.headers['x-ratelimit-limit']], [200, '10'])
    await app.close()
  })
})

describe('the factory used as the middleware (app.use(rateLimit))', () => {
  const message = /rateLimit was used as the middleware itself; call rateLimit\(\{ limiter \}\) first and use what it returns/

  for (const [name, createApp] of [
    ['express 5', express5],
    ['express 4', express4],
  ] as const) {
    it(`${name}: the error handler gets the message`, async () => {
      const errors: Error[] = []
      const app = createApp()
      app.use(expressRateLimit as never)
      app.get('/', (_req, res) => void res.send('not limited'))
      app.use((error: Error, _req: Request, res: Response, _next: NextFunction) => {
        errors.push(error)
        res.status(500).send(error.message)
      })
      const response = await get(app as unknown as RequestListener)
      assert.equal(response.status, 500)
      assert.match(response.text, message)
      assert.match(response.text, /: app\.use\(rateLimit\(\{ limiter \}\)\)$/)
    })
  }

  it('koa: a 500 and the message in its error event', async () => {
    const errors: Error[] = []
    const app = new Koa()
    app.on('error', (error: Error) => errors.push(error))
    app.use(koaRateLimit as never)
    assert.equal((await get(app.callback())).status, 500)
    assert.match(errors[0].message, message)
  })

  it('hono: onError gets the message', async () => {
    const errors: Error[] = []
    const app = new Hono()
    app.onError((error, c) => {
      errors.push(error)
      return c.text('error handler', 500)
    })
    app.use(honoRateLimit as never)
    app.get('/', (c) => c.text('not limited'))
    assert.equal((await app.request('/')).status, 500)
    assert.match(errors[0].message, message)
  })

  it('node:http: createServer(rateLimit) and createServer(withRateLimit) answer 500 with the message, and warn once', async () => {
    const warnings = await warningsDuring('FG_MISCONFIGURED', async () => {
      const first = await get(nodeRateLimit as unknown as RequestListener)
      assert.equal(first.status, 500)
      assert.match(first.text, message)
      assert.match(first.text, /createServer\(withRateLimit\(handler, \{ limiter \}\)\)/)
      assert.equal((await get(nodeRateLimit as unknown as RequestListener)).status, 500)
      const second = await get(withRateLimit as unknown as RequestListener)
      assert.equal(second.status, 500)
      assert.match(second.text, /^withRateLimit was used as the middleware itself; call withRateLimit\(handler, \{ limiter \}\) first/)
    })
    assert.equal(warnings.length, 1)
    assert.match(warnings[0], message)
  })
})
