// Every middleware option error, with the field it names and the advice it gives; each adapter validates at setup.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import Fastify from 'fastify'
import { FloodgateError } from '../../src/core/errors.js'
import { RateLimiter } from '../../src/limiter/rate-limiter.js'
import { resolveHttpOptions, type HttpLimitOptions } from '../../src/http/options.js'
import { rateLimit as expressRateLimit } from '../../src/express.js'
import { floodgate } from '../../src/fastify.js'
import { rateLimit as koaRateLimit } from '../../src/koa.js'
import { rateLimit as honoRateLimit } from '../../src/hono.js'
import { rateLimit as nodeRateLimit } from '../../src/node.js'

const limiter = new RateLimiter({ policies: [{ algorithm: 'fixed-window', limit: 10, period: '1m' }] })

function rejects(action: () => unknown, message: RegExp): void {
  assert.throws(action, (error: unknown) => {
    assert.ok(error instanceof FloodgateError, `expected a FloodgateError, got ${String(error)}`)
    assert.equal(error.code, 'INVALID_OPTION')
    assert.match(error.message, message)
    return true
  })
}

describe('resolveHttpOptions', () => {
  it('accepts a limiter alone and fills in the documented defaults', () => {
    const resolved = resolveHttpOptions({ limiter })
    assert.deepEqual(resolved.headerStyles, ['legacy', 'draft-8'])
    assert.equal(resolved.body, 'json')
    assert.equal(resolved.ipv6Subnet, 56)
    assert.equal(resolved.maxDelayMs, 5000)
    assert.equal(resolved.trust.kind, 'none')
    assert.equal(resolved.forwardedHeader, 'x-forwarded-for')
    assert.equal(resolved.requestWasSuccessful(399, undefined), true)
    assert.equal(resolved.requestWasSuccessful(400, undefined), false)
  })

  it('rejects each invalid option with its field and what to write', () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ limiter: undefined }, /^limiter: required: pass a RateLimiter/],
      [{ limiter: { limit: () => {} } }, /^limiter: required/],
      [{ limiter, keyGen: () => 'x' }, /^keyGen: unknown option; known options are limiter, key, /],
      [{ limiter, keyGenerator: () => 'x' }, /^keyGenerator: unknown option: use key: /],
      [{ limiter, key: 'ip' }, /^key: must be a function \(req, info\) => key of the request, got the string "ip"/],
      [{ limiter, cost: -1 }, /^cost: must be a whole number ≥ 0 or a function/],
      [{ limiter, cost: 1.5 }, /^cost: must be a whole number/],
      [{ limiter, skip: true }, /^skip: must be a function/],
      [{ limiter, trustProxy: true }, /^trustProxy: true would believe every X-Forwarded-For entry/],
      [{ limiter, trustProxy: ['10.0.0.0/40'] }, /^trustProxy\[0\]: "10.0.0.0\/40" is not an IP address or CIDR/],
      [{ limiter, forwardedHeader: 'x-real-ip' }, /^forwardedHeader: unknown header "x-real-ip"; use 'x-forwarded-for' or 'forwarded'/],
      [{ limiter, ipv6Subnet: 0 }, /^ipv6Subnet: must be a prefix length from 1 to 128/],
      [{ limiter, ipv6Subnet: 129 }, /^ipv6Subnet: must be a prefix length/],
      [{ limiter, ipv6Subnet: true }, /^ipv6Subnet: must be a prefix length/],
      [{ limiter, headers: 'draft-9' }, /^headers: unknown style "draft-9"; use legacy, draft-6, draft-7, draft-8/],
      [{ limiter, headers: ['draft-6', 'draft-8'] }, /^headers: draft-6 and draft-8 both write RateLimit-Policy/],
      [{ limiter, headers: true }, /^headers: unknown style true/],
      [{ limiter, body: 'html' }, /^body: unknown format "html"; use 'json' or 'problem'/],
      [{ limiter, skipSuccessfulRequests: 'yes' }, /^skipSuccessfulRequests: must be true or false/],
      [{ limiter, skipFailedRequests: 1 }, /^skipFailedRequests: must be true or false/],
      [
        { limiter, skipSuccessfulRequests: true, skipFailedRequests: true },
        /^skipFailedRequests: together with skipSuccessfulRequests nothing would ever be counted/,
      ],
      [{ limiter, requestWasSuccessful: 200 }, /^requestWasSuccessful: must be a function/],
      [{ limiter, onError: 'log' }, /^onError: must be a function/],
      [{ limiter, onWarning: 'log' }, /^onWarning: must be a function/],
      [{ limiter, handler: () => {} }, /^handler: unknown option/],
    ]
    for (const [options, message] of cases) {
      rejects(() => resolveHttpOptions(options as unknown as HttpLimitOptions<unknown>), message)
    }
  })

  it('maxDelayMs takes a duration or 0 and names itself in duration errors', () => {
    assert.equal(resolveHttpOptions({ limiter, maxDelayMs: '2s' }).maxDelayMs, 2000)
    assert.equal(resolveHttpOptions({ limiter, maxDelayMs: 0 }).maxDelayMs, 0)
    assert.throws(() => resolveHttpOptions({ limiter, maxDelayMs: 'soon' as '1s' }), /maxDelayMs: "soon" is not a duration/)
  })

  it('headers accepts one style, a list (deduplicated), or false', () => {
    assert.deepEqual(resolveHttpOptions({ limiter, headers: 'draft-6' }).headerStyles, ['draft-6'])
    assert.deepEqual(resolveHttpOptions({ limiter, headers: ['legacy', 'draft-7', 'legacy'] }).headerStyles, ['legacy', 'draft-7'])
    assert.deepEqual(resolveHttpOptions({ limiter, headers: false }).headerStyles, [])
  })
})

describe('adapters validate at setup', () => {
  it('Express, Koa, Hono and node:http throw from the factory', () => {
    for (const factory of [expressRateLimit, koaRateLimit, honoRateLimit, nodeRateLimit] as ((o: object) => unknown)[]) {
      rejects(() => factory({ limiter, trustProxy: true }), /^trustProxy: true would believe/)
      rejects(() => factory({ limiter, handler: 'send 429' }), /^handler: must be a function/)
    }
    rejects(() => honoRateLimit({ limiter, remoteAddress: '1.2.3.4' as never }), /^remoteAddress: must be a function/)
  })

  it('Fastify fails at registration, and for a route with bad config.rateLimit when the route is added', async () => {
    const app = Fastify()
    app.register(floodgate, { limiter, headers: 'draft-9' as 'draft-8' })
    await assert.rejects(async () => void (await app.ready()), /^FloodgateError: headers: unknown style/)
    await app.close()

    const other = Fastify()
    await other.register(floodgate, { limiter })
    assert.throws(
      () => other.get('/x', { config: { rateLimit: { body: 'xml' as 'json' } } }, async () => 'x'),
      /body: unknown format "xml"/,
    )
    rejects(() => other.get('/y', { config: { rateLimit: { global: false } as never } }, async () => 'y'), /^global: unknown option/)
    await other.close()

    // Not awaited, the plugin runs after this route was added: its config fails its first request, by name.
    const late = Fastify()
    late.register(floodgate, { limiter })
    late.get('/z', { config: { rateLimit: { body: 'xml' as 'json' } } }, async () => 'z')
    const failed = await late.inject('/z')
    assert.equal(failed.statusCode, 500)
    assert.match(JSON.parse(failed.body).message, /body: unknown format "xml"/)
    await late.close()

    const strict = Fastify()
    strict.register(floodgate, { limiter, global: 'yes' as unknown as boolean })
    await assert.rejects(async () => void (await strict.ready()), /global: must be true/)
    await strict.close()
  })
})
