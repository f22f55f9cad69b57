// Header writers and 429 bodies; the structured fields are parsed back with the independent structured-headers parser.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import { parseList, parseDictionary } from 'structured-headers'
import type { Decision, PolicyDecision } from '../../src/limiter/types.js'
import {
  draft6Headers,
  draft7Headers,
  draft8Headers,
  legacyHeaders,
  rateLimitHeaders,
  retryAfterHeader,
  sfString,
} from '../../src/http/headers.js'
import { QUOTA_EXCEEDED_TYPE, rejectBody } from '../../src/http/responses.js'

function part(name: string, fields: Partial<PolicyDecision> = {}): PolicyDecision {
  return {
    name,
    algorithm: 'sliding-window',
    limit: 100,
    periodMs: 60_000,
    allowed: true,
    remaining: 50,
    resetMs: 30_000,
    retryAfterMs: 0,
    delayMs: 0,
    blocked: false,
    over: false,
    shadow: false,
    ...fields,
  }
}

/** A decision as the limiter gives it: the deciding policy's numbers repeated at the top. */
function decisionOf(policies: PolicyDecision[], deciding = 0): Decision {
  const d = policies[deciding]
  return {
    allowed: policies.every((p) => p.allowed),
    limit: d.limit,
    remaining: d.remaining,
    resetMs: d.resetMs,
    retryAfterMs: d.retryAfterMs,
    delayMs: 0,
    policy: d.name,
    over: false,
    shadow: false,
    source: 'store',
    policies,
  }
}

const allowed = decisionOf([
  part('burst', { remaining: 50 }),
  part('daily', { limit: 1000, periodMs: 86_400_000, remaining: 900, resetMs: 3_600_000 }),
])
const denied = decisionOf([
  part('burst', { allowed: false, remaining: 0, resetMs: 60_000, retryAfterMs: 29_001 }),
  part('daily', { limit: 1000, periodMs: 86_400_000, remaining: 900 }),
])

function toMap(headers: [string, string][]): Map<string, string> {
  return new Map(headers)
}

describe('legacy headers', () => {
  it('sends the deciding policy with Reset in epoch seconds, never before the wait ends', () => {
    const now = 1_700_000_000_500
    assert.deepEqual(legacyHeaders(allowed, now), [
      ['X-RateLimit-Limit', '100'],
      ['X-RateLimit-Remaining', '50'],
      ['X-RateLimit-Reset', String(1_700_000_001 + 30)],
    ])
    const reset = Number(toMap(legacyHeaders(denied, now)).get('X-RateLimit-Reset'))
    assert.ok(reset * 1000 >= now + denied.retryAfterMs)
  })
})

describe('draft-6 and draft-7 headers', () => {
  it('draft-6 lists every policy and the deciding one in separate fields', () => {
    assert.deepEqual(draft6Headers(allowed), [
      ['RateLimit-Policy', '100;w=60, 1000;w=86400'],
      ['RateLimit-Limit', '100'],
      ['RateLimit-Remaining', '50'],
      ['RateLimit-Reset', '30'],
    ])
  })

  it('draft-7 combines limit, remaining and reset in one field that parses as a dictionary', () => {
    const headers = toMap(draft7Headers(denied))
    assert.equal(headers.get('RateLimit'), 'limit=100, remaining=0, reset=30')
    const dict = parseDictionary(headers.get('RateLimit')!)
    assert.deepEqual(
      [...dict].map(([k, v]) => [k, (v as [unknown, unknown])[0]]),
      [
        ['limit', 100],
        ['remaining', 0],
        ['reset', 30],
      ],
    )
  })
})

describe('draft-8 structured headers', () => {
  it('writes one list member per policy with q/w and r/t', () => {
    assert.deepEqual(draft8Headers(allowed), [
      ['RateLimit-Policy', '"burst";q=100;w=60, "daily";q=1000;w=86400'],
      ['RateLimit', '"burst";r=50;t=30, "daily";r=900;t=3600'],
    ])
  })

  it('describes each policy by its own numbers when the same name comes back with others', () => {
    const one = decisionOf([part('api', { limit: 10, periodMs: 1_000 })])
    const other = decisionOf([part('api', { limit: 20, periodMs: 60_000 })])
    assert.equal(draft8Headers(one)[0][1], '"api";q=10;w=1')
    assert.equal(draft8Headers(other)[0][1], '"api";q=20;w=60')
    assert.equal(draft8Headers(one)[0][1], '"api";q=10;w=1')
  })

  it('parses with an independent RFC 8941 parser for any policy names and numbers', () => {
    const name = fc.string({ unit: 'binary', minLength: 1, maxLength: 20 })
    const policy = fc.record({
      name,
      limit: fc.integer({ min: 1, max: 1e9 }),
      periodMs: fc.integer({ min: 1, max: 1e10 }),
      remaining: fc.integer({ min: 0, max: 1e9 }),
      resetMs: fc.integer({ min: 0, max: 1e10 }),
      retryAfterMs: fc.integer({ min: 0, max: 1e10 }),
      allowed: fc.boolean(),
    })
    fc.assert(
      fc.property(fc.array(policy, { minLength: 1, maxLength: 4 }), (policies) => {
        const decision = decisionOf(policies.map((p) => part(p.name, p)))
        const headers = toMap(draft8Headers(decision))
        const policyList = parseList(headers.get('RateLimit-Policy')!)
        const stateList = parseList(headers.get('RateLimit')!)
        assert.equal(policyList.length, policies.length)
        for (const [i, p] of policies.entries()) {
          const [policyName, policyParams] = policyList[i] as [unknown, Map<string, unknown>]
          assert.equal(typeof policyName, 'string')
          assert.equal(policyParams.get('q'), p.limit)
          assert.ok((policyParams.get('w') as number) * 1000 >= p.periodMs)
          const [stateName, stateParams] = stateList[i] as [unknown, Map<string, unknown>]
          assert.equal(stateName, policyName)
          assert.equal(stateParams.get('r'), p.remaining)
          const waitMs = p.allowed ? p.resetMs : p.retryAfterMs
          assert.ok((stateParams.get('t') as number) * 1000 >= waitMs)
        }
      }),
      { numRuns: 300 },
    )
  })

  it('marks a concurrency policy with qu="concurrent-requests" and leaves rate policies at the default unit', () => {
    const mixed = decisionOf([part('burst'), part('in-flight', { algorithm: 'concurrency', limit: 5, remaining: 4 })])
    const headers = toMap(draft8Headers(mixed))
    assert.equal(headers.get('RateLimit-Policy'), '"burst";q=100;w=60, "in-flight";q=5;qu="concurrent-requests";w=60')
    const [burst, inFlight] = parseList(headers.get('RateLimit-Policy')!) as [unknown, Map<string, unknown>][]
    assert.equal(burst[1].has('qu'), false)
    assert.deepEqual(
      [inFlight[0], inFlight[1].get('q'), inFlight[1].get('qu'), inFlight[1].get('w')],
      ['in-flight', 5, 'concurrent-requests', 60],
    )
    // The other generations have no unit parameter and stay as they were.
    assert.equal(toMap(draft6Headers(mixed)).get('RateLimit-Policy'), '100;w=60, 5;w=60')
    assert.equal(toMap(draft7Headers(mixed)).get('RateLimit-Policy'), '100;w=60, 5;w=60')
  })

  it('escapes quotes and backslashes and replaces what a String cannot hold', () => {
    assert.equal(sfString('a"b\\c'), '"a\\"b\\\\c"')
    assert.equal(sfString('tier-é\n'), '"tier-??"')
    assert.deepEqual(parseList(`${sfString('a"b\\c')};q=1`)[0][0], 'a"b\\c')
  })

  it('quotes plain names as they are and agrees with the escaping loop on any text', () => {
    assert.equal(sfString('fixed-window-100-per-1m'), '"fixed-window-100-per-1m"')
    const escaped = (text: string) =>
      `"${[...text].map((c) => (c === '"' || c === '\\' ? `\\${c}` : c < ' ' || c > '~' ? '?' : c)).join('')}"`
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          fc.string({ unit: 'binary' }),
          fc.string({ unit: fc.constantFrom('a', '"', '\\', ' ', '~', '\x7f', '\x1f') }),
        ),
        (text) => {
          assert.equal(sfString(text), escaped(text))
        },
      ),
      { numRuns: 500 },
    )
  })
})

describe('Retry-After', () => {
  it('is sent only on denial, in whole seconds ceiled, at least 1, and not earlier than t', () => {
    assert.deepEqual(retryAfterHeader(allowed), [])
    assert.deepEqual(retryAfterHeader(denied), [['Retry-After', '30']])
    assert.deepEqual(retryAfterHeader({ ...denied, retryAfterMs: 0 }), [['Retry-After', '1']])
    const headers = toMap(rateLimitHeaders(denied, ['draft-8'], Date.now()))
    const t = parseList(headers.get('RateLimit')!).map((m) => (m as [unknown, Map<string, number>])[1].get('t')!)
    const deniedT = t[0]
    assert.ok(Number(headers.get('Retry-After')) >= deniedT)
  })

  it('rateLimitHeaders combines the chosen styles', () => {
    const names = rateLimitHeaders(denied, ['legacy', 'draft-7'], Date.now()).map(([name]) => name)
    assert.deepEqual(names, [
      'X-RateLimit-Limit',
      'X-RateLimit-Remaining',
      'X-RateLimit-Reset',
      'RateLimit-Policy',
      'RateLimit',
      'Retry-After',
    ])
    assert.deepEqual(rateLimitHeaders(allowed, [], Date.now()), [])
  })
})

describe('429 bodies', () => {
  it('JSON a person can read', () => {
    const body = rejectBody(denied, 'json')
    assert.equal(body.status, 429)
    assert.equal(body.contentType, 'application/json; charset=utf-8')
    assert.deepEqual(JSON.parse(body.body), {
      error: 'rate_limited',
      message: 'Rate limit exceeded: 100 requests per 1m',
      retryAfter: 30,
      policy: 'burst',
    })
  })

  it('words a concurrency denial as requests in flight, not per period', () => {
    const inFlight = decisionOf([
      part('in-flight', { algorithm: 'concurrency', limit: 5, allowed: false, remaining: 0, retryAfterMs: 1000 }),
    ])
    assert.equal(JSON.parse(rejectBody(inFlight, 'json').body).message, 'Rate limit exceeded: 5 concurrent requests')
    const one = decisionOf([part('one', { algorithm: 'concurrency', limit: 1, allowed: false, remaining: 0, retryAfterMs: 1000 })])
    assert.equal(JSON.parse(rejectBody(one, 'problem').body).detail, 'Rate limit exceeded: 1 concurrent request; retry in 1s')
  })

  it('problem+json with the quota-exceeded type and every violated policy', () => {
    const both = decisionOf(
      [
        part('burst', { allowed: false, remaining: 0, retryAfterMs: 1000 }),
        part('daily', { allowed: false, remaining: 0, retryAfterMs: 9000 }),
      ],
      1,
    )
    const body = rejectBody(both, 'problem')
    assert.equal(body.contentType, 'application/problem+json')
    assert.deepEqual(JSON.parse(body.body), {
      type: QUOTA_EXCEEDED_TYPE,
      title: 'Request cannot be satisfied as assigned quota has been exceeded',
      status: 429,
      detail: 'Rate limit exceeded: 100 requests per 1m; retry in 9s',
      'violated-policies': ['burst', 'daily'],
    })
  })
})
