// A cost above what a policy could ever admit: every algorithm answers "never" (no wait), charges nothing, starts no block.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { ALGORITHMS, type PolicyOptions } from '../../src/core/policy.js'
import { RateLimiter } from '../../src/limiter/rate-limiter.js'
import { MemoryStore } from '../../src/stores/memory/memory-store.js'
import { rateLimitHeaders } from '../../src/http/headers.js'
import { rejectBody } from '../../src/http/responses.js'
import { rateLimitedWait } from '../../src/client/retry.js'

const T0 = 1_700_000_000_000

function limiter(policy: Omit<PolicyOptions, 'name'>, extra: PolicyOptions[] = []) {
  return new RateLimiter({ policies: [{ name: 'p', ...policy }, ...extra], clock: () => T0, store: new MemoryStore({ clock: () => T0 }) })
}

describe('a cost no policy could ever admit', () => {
  for (const algorithm of ALGORITHMS) {
    for (const burst of [undefined, 6]) {
      it(`${algorithm}${burst === undefined ? '' : ` (burst ${burst})`}: never, with no wait, nothing charged`, async () => {
        const fg = limiter({ algorithm, limit: 4, period: '1m', burst })
        const capacity = (await fg.get('k')).remaining
        const decision = await fg.limit('k', { cost: capacity + 1 })
        assert.equal(decision.allowed, false)
        assert.equal(decision.never, true)
        assert.equal(decision.retryAfterMs, 0)
        assert.equal(decision.policy, 'p')
        assert.equal(decision.policies[0].never, true)
        assert.equal((await fg.get('k')).remaining, capacity, 'nothing was charged')
        // The most a fresh key can spend still passes, and is not "never" once spent.
        const full = await fg.limit('k', { cost: capacity })
        assert.equal(full.allowed, true)
        const after = await fg.limit('k', { cost: 1 })
        assert.equal(after.allowed, false)
        assert.equal(after.never, undefined)
      })
    }
  }

  it('counts soft overage as the store runs it; shadow policies never say never', async () => {
    const soft = limiter({ algorithm: 'fixed-window', limit: 10, period: '1m', mode: 'soft', overage: 0.5 })
    assert.equal((await soft.limit('k', { cost: 15 })).allowed, true)
    assert.equal((await soft.limit('j', { cost: 16 })).never, true)
    const shadowed = limiter({ algorithm: 'token-bucket', limit: 10, period: '1m' }, [
      { name: 's', algorithm: 'token-bucket', limit: 2, period: '1m', shadow: true },
    ])
    const decision = await shadowed.limit('k', { cost: 5 })
    assert.equal(decision.allowed, true)
    assert.equal(decision.never, undefined)
  })

  it('starts no block period and leaves the deny cache alone', async () => {
    const fg = limiter({ algorithm: 'fixed-window', limit: 3, period: '1m', blockMs: '1h' })
    assert.equal((await fg.limit('k', { cost: 4 })).never, true)
    const next = await fg.limit('k')
    assert.equal(next.allowed, true)
    assert.equal(next.source, 'store')
  })

  it('fixed-window limit 0 (deny everything) is never too, and the reset time is kept for Envoy-style answers', async () => {
    const fg = limiter({ algorithm: 'fixed-window', limit: 0, period: '1m' })
    const decision = await fg.limit('k')
    assert.equal(decision.never, true)
    assert.equal(decision.retryAfterMs, 0)
    assert.ok(decision.resetMs > 0)
  })

  it('headers: no Retry-After, and the quota fields say when the quota is restored', async () => {
    const fg = limiter({ algorithm: 'gcra', limit: 5, period: '10s' })
    await fg.limit('k', { cost: 2 })
    const decision = await fg.limit('k', { cost: 6 })
    const headers = new Map(rateLimitHeaders(decision, ['legacy', 'draft-8'], T0))
    assert.equal(headers.has('Retry-After'), false)
    assert.equal(headers.get('X-RateLimit-Remaining'), '3')
    assert.equal(headers.get('RateLimit'), `"p";r=3;t=${Math.ceil(decision.resetMs / 1000)}`)
    assert.ok(decision.resetMs > 0)
  })

  it('bodies: 413 in both formats, saying it will never pass and naming the policy, without retryAfter', async () => {
    const fg = limiter({ algorithm: 'token-bucket', limit: 5, period: '1m' })
    const decision = await fg.limit('k', { cost: 9 })
    const json = rejectBody(decision, 'json')
    assert.equal(json.status, 413)
    assert.deepEqual(JSON.parse(json.body), {
      error: 'cost_exceeds_limit',
      message: 'Request exceeds what the rate limit can ever admit at once (5 requests per 1m); it will never pass: send a smaller one',
      policy: 'p',
      never: true,
    })
    const problem = rejectBody(decision, 'problem')
    assert.equal(problem.status, 413)
    assert.equal(problem.contentType, 'application/problem+json')
    const body = JSON.parse(problem.body)
    assert.equal(body.status, 413)
    assert.deepEqual(body['violated-policies'], ['p'])
    assert.match(body.detail, /never pass/)
    // An ordinary denial is still a 429 with a wait.
    await fg.limit('k', { cost: 5 })
    const denied = await fg.limit('k')
    assert.equal(rejectBody(denied, 'json').status, 429)
  })

  it('the SDK does not retry an answer that says never, and still retries an ordinary denial', () => {
    assert.equal(rateLimitedWait({ allowed: false, never: true, retryAfterMs: 0, results: [] }), undefined)
    assert.equal(rateLimitedWait({ allowed: false, retryAfterMs: 1_500, results: [] }), 1_500)
  })
})
