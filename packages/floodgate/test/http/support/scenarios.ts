// Scenarios every adapter must pass, against any store: limits, headers, bodies, proxies, IPv6, refunds, delays, leases.

import assert from 'node:assert/strict'
import { parseList } from 'structured-headers'
import { RateLimiter } from '../../../src/limiter/rate-limiter.js'
import type { PolicyOptions } from '../../../src/core/policy.js'
import type { Store } from '../../../src/stores/store.js'
import type { HttpWarning } from '../../../src/http/options.js'
import { get, type Framework, type RunningApp, type SharedOptions } from './apps.js'

/** Makes a store for one scenario (fresh state each time). */
export type StoreFactory = () => Store

export interface ScenarioContext {
  framework: Framework
  newStore: StoreFactory
}

/** Starts the framework's app with a limiter over a fresh store, runs `body`, and stops everything. */
async function withApp(
  context: ScenarioContext,
  policies: PolicyOptions[],
  options: Omit<SharedOptions, 'limiter'>,
  body: (app: RunningApp, limiter: RateLimiter) => Promise<void>,
): Promise<void> {
  // A generous store timeout: a busy test machine must not turn a Redis decision into a fail-open one.
  const limiter = new RateLimiter({ store: context.newStore(), policies, denyCache: false, timeout: '5s' })
  const app = await context.framework.start({ limiter, onWarning: () => {}, ...options })
  try {
    await body(app, limiter)
  } finally {
    await app.close()
    await limiter.store.close()
  }
}

/** Waits until `check` passes: refunds and releases run when the server sees the response end, just after the client may. */
async function eventually(check: () => Promise<void>): Promise<void> {
  const deadline = Date.now() + 5_000
  for (;;) {
    try {
      return await check()
    } catch (error) {
      if (Date.now() > deadline) throw error
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
  }
}

// A rolling window: an epoch-aligned one would restart mid-test whenever a minute boundary falls inside it.
const burst = (limit: number): PolicyOptions[] => [{ name: 'burst', algorithm: 'sliding-log', limit, period: '1m' }]

function statuses(replies: { status: number }[]): number[] {
  return replies.map((r) => r.status)
}

async function sequential(app: RunningApp, count: number, path: string, headers: (i: number) => Record<string, string> = () => ({})) {
  const replies = []
  for (let i = 0; i < count; i++) replies.push(await get(app, path, headers(i)))
  return replies
}

export const scenarios: Record<string, (context: ScenarioContext) => Promise<void>> = {
  async 'admits up to the limit, then answers 429 with headers and a readable JSON body'(context) {
    await withApp(context, burst(3), {}, async (app) => {
      const replies = await sequential(app, 4, '/ok')
      assert.deepEqual(statuses(replies), [200, 200, 200, 429])
      assert.deepEqual(
        replies.slice(0, 3).map((r) => r.headers.get('x-ratelimit-remaining')),
        ['2', '1', '0'],
      )
      const denied = replies[3]
      assert.equal(denied.headers.get('x-ratelimit-limit'), '3')
      assert.ok(Number(denied.headers.get('x-ratelimit-reset')) > Date.now() / 1000)
      const retryAfter = Number(denied.headers.get('retry-after'))
      assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter}`)
      assert.equal(denied.headers.get('ratelimit-policy'), '"burst";q=3;w=60')
      const [[name, params]] = parseList(denied.headers.get('ratelimit')!) as [unknown, Map<string, number>][]
      assert.equal(name, 'burst')
      assert.equal(params.get('r'), 0)
      assert.ok(params.get('t')! <= retryAfter)
      assert.match(denied.headers.get('content-type')!, /^application\/json/)
      assert.deepEqual(JSON.parse(denied.text), {
        error: 'rate_limited',
        message: 'Rate limit exceeded: 3 requests per 1m',
        retryAfter,
        policy: 'burst',
      })
    })
  },

  async 'answers application/problem+json when asked'(context) {
    await withApp(context, burst(1), { body: 'problem', headers: ['draft-7'] }, async (app) => {
      const replies = await sequential(app, 2, '/ok')
      assert.deepEqual(statuses(replies), [200, 429])
      assert.match(replies[0].headers.get('ratelimit')!, /^limit=1, remaining=0, reset=\d+$/)
      assert.equal(replies[1].headers.get('x-ratelimit-limit'), null)
      assert.match(replies[1].headers.get('content-type')!, /^application\/problem\+json/)
      const problem = JSON.parse(replies[1].text)
      assert.equal(problem.status, 429)
      assert.deepEqual(problem['violated-policies'], ['burst'])
    })
  },

  async 'exposes the decision to handlers'(context) {
    await withApp(context, burst(5), {}, async (app) => {
      const decision = JSON.parse((await get(app, '/decision')).text)
      assert.equal(decision.policy, 'burst')
      assert.equal(decision.remaining, 4)
      assert.equal(decision.allowed, true)
    })
  },

  async 'with trustProxy off, spoofed forwarding headers are ignored (and warned about once)'(context) {
    const warnings: HttpWarning[] = []
    await withApp(context, burst(2), { onWarning: (w) => warnings.push(w) }, async (app) => {
      const replies = await sequential(app, 3, '/ok', (i) => ({ 'x-forwarded-for': `198.51.100.${i + 1}` }))
      assert.deepEqual(statuses(replies), [200, 200, 429])
      assert.deepEqual(
        warnings.map((w) => w.code),
        ['FG_FORWARDED_HEADER_IGNORED'],
      )
    })
  },

  async 'with a hop count, the client is the proxy-appended address, whatever the client prepends'(context) {
    await withApp(context, burst(2), { trustProxy: 1 }, async (app) => {
      const spoofing = await sequential(app, 3, '/ok', (i) => ({ 'x-forwarded-for': `6.6.6.${i}, 198.51.100.7` }))
      assert.deepEqual(statuses(spoofing), [200, 200, 429])
      assert.equal((await get(app, '/ok', { 'x-forwarded-for': '198.51.100.8' })).status, 200)
    })
  },

  async 'with trusted CIDRs, the first untrusted address from the right is the client'(context) {
    await withApp(context, burst(2), { trustProxy: ['127.0.0.1/32', '10.0.0.0/8'] }, async (app) => {
      const spoofing = await sequential(app, 3, '/ok', (i) => ({ 'x-forwarded-for': `10.0.0.${i}, 198.51.100.7, 10.1.1.1` }))
      assert.deepEqual(statuses(spoofing), [200, 200, 429])
      assert.equal((await get(app, '/ok', { 'x-forwarded-for': '198.51.100.8, 10.1.1.1' })).status, 200)
    })
  },

  async 'IPv6 addresses rotating inside one /56 share a limit; another /56 does not'(context) {
    await withApp(context, burst(2), { trustProxy: ['loopback'] }, async (app) => {
      const rotating = ['2001:db8:abcd:1201::1', '2001:db8:abcd:12ff:ffff:ffff:ffff:ffff', '2001:db8:abcd:1234::beef']
      const replies = await sequential(app, 3, '/ok', (i) => ({ 'x-forwarded-for': rotating[i] }))
      assert.deepEqual(statuses(replies), [200, 200, 429])
      assert.equal((await get(app, '/ok', { 'x-forwarded-for': '2001:db8:abcd:1301::1' })).status, 200)
    })
  },

  async 'skipSuccessfulRequests counts failures only'(context) {
    await withApp(context, burst(2), { skipSuccessfulRequests: true }, async (app, limiter) => {
      const remaining = async () => (await limiter.get('ip:127.0.0.1')).remaining
      for (let i = 0; i < 4; i++) {
        assert.equal((await get(app, '/ok')).status, 200)
        await eventually(async () => assert.equal(await remaining(), 2))
      }
      assert.equal((await get(app, '/fail')).status, 500)
      assert.equal((await get(app, '/fail')).status, 500)
      await eventually(async () => assert.equal(await remaining(), 0))
      assert.equal((await get(app, '/fail')).status, 429)
      assert.equal((await get(app, '/ok')).status, 429)
    })
  },

  async 'skipFailedRequests counts successes only'(context) {
    await withApp(context, burst(1), { skipFailedRequests: true }, async (app, limiter) => {
      assert.equal((await get(app, '/fail')).status, 500)
      await eventually(async () => assert.equal((await limiter.get('ip:127.0.0.1')).remaining, 1))
      assert.equal((await get(app, '/ok')).status, 200)
      assert.equal((await get(app, '/ok')).status, 429)
    })
  },

  async 'an unexpected error is reported and the request passes (fail open)'(context) {
    const errors: unknown[] = []
    const key = () => {
      throw new Error('user directory is down')
    }
    await withApp(context, burst(1), { key, onError: (error) => errors.push(error) }, async (app) => {
      const replies = await sequential(app, 2, '/ok')
      assert.deepEqual(statuses(replies), [200, 200])
      assert.equal(replies[0].headers.get('x-ratelimit-limit'), null)
      assert.equal(errors.length, 2)
      assert.match(String(errors[0]), /user directory is down/)
    })
  },
}

/** Scenarios that need the leaky-bucket and concurrency algorithms. */
export const shapingScenarios: Record<string, (context: ScenarioContext) => Promise<void>> = {
  async 'delay mode waits for shaping policies, and answers 429 past maxDelayMs'(context) {
    // One turn a second, and a wait of at most 1.5 s: of three requests sent together, the second
    // waits its turn (about 1 s) and the third, whose turn is about 2 s away, is refused. Turns a
    // second apart leave the requests half a second to arrive in, however busy the machine: with
    // turns of 100 ms, six requests that a loaded machine spread over 300 ms were all admitted.
    const shaping: PolicyOptions[] = [{ name: 'shape', algorithm: 'leaky-bucket', limit: 1, period: '1s', burst: 10, shaping: true }]
    await withApp(context, shaping, { maxDelayMs: 1_500 }, async (app) => {
      const started = Date.now()
      const replies = await Promise.all(Array.from({ length: 3 }, () => get(app, '/decision')))
      const admitted = replies.filter((r) => r.status === 200).map((r) => JSON.parse(r.text) as { delayMs: number })
      const delays = admitted.map((d) => d.delayMs).sort((a, b) => a - b)
      assert.ok(
        delays.every((d) => d <= 1_500),
        `delays ${delays}`,
      )
      assert.ok(
        delays.some((d) => d > 0),
        `some request had to wait: ${delays}`,
      )
      // Timers never fire early by more than rounding: an admitted request waited its delay.
      assert.ok(Date.now() - started >= Math.max(...delays) - 2)
      const denied = replies.filter((r) => r.status === 429)
      assert.ok(denied.length >= 1, `statuses ${statuses(replies)}`)
      assert.equal(JSON.parse(denied[0].text).policy, 'shape')
      assert.ok(Number(denied[0].headers.get('retry-after')) >= 1)
    })
  },

  async 'concurrency leases are released when the response finishes'(context) {
    const inFlight: PolicyOptions[] = [{ name: 'in-flight', algorithm: 'concurrency', limit: 1, period: '1m' }]
    await withApp(context, inFlight, {}, async (app, limiter) => {
      for (let i = 0; i < 3; i++) {
        const reply = await get(app, '/ok')
        assert.equal(reply.status, 200)
        assert.equal(reply.headers.get('ratelimit-policy'), '"in-flight";q=1;qu="concurrent-requests";w=60')
        await eventually(async () => assert.equal((await limiter.get('ip:127.0.0.1')).remaining, 1))
      }
    })
  },
}
