// keys.fromRules: rules files drive the middleware through real servers; hot reload and a broken edit on real files.

import { describe, it, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseList } from 'structured-headers'
import { FloodgateError } from '../../src/core/errors.js'
import { RateLimiter } from '../../src/limiter/rate-limiter.js'
import { parseRules, RuleWatcher, type ConfigError, type RuleSet } from '../../src/rules.js'
import { descriptor, keys, NOT_LIMITED, type KeyPart, type RequestInfo } from '../../src/http/index.js'
import { FRAMEWORKS, get, type Framework, type RunningApp, type SharedOptions } from './support/apps.js'

// Rolling windows only: an epoch-aligned one could restart mid-test at a minute boundary.
const rulesYaml = (perIp: number): string => `
domain: web
descriptors:
  - key: remote_address
    limits:
      - { name: per-ip, algorithm: sliding-log, limit: ${perIp}, period: 1m }
  - key: user
    value: vip
    rate_limit: { unlimited: true }
  - key: user
    limits:
      - { name: per-user, algorithm: sliding-log, limit: 2, period: 1m }
  - key: plan
    value: trial
    shadow_mode: true
    limits:
      - { name: trial, algorithm: sliding-log, limit: 1, period: 1m }
`

/** The descriptors every test sends: the client IP, the user header, the plan header. */
const byIpUserAndPlan = (_req: unknown, info: RequestInfo) => [
  [descriptor.remoteAddress(info)],
  [descriptor.header(info, 'x-user', 'user')],
  [descriptor.header(info, 'x-plan', 'plan')],
]

/** Resolves with the watcher's next `event`; fails instead of hanging if none comes. */
function next(watcher: RuleWatcher, event: 'reload' | 'error'): Promise<RuleSet | ConfigError> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no '${event}' event within 10s`)), 10_000)
    watcher.once(event as 'reload', (value: RuleSet | ConfigError) => {
      clearTimeout(timer)
      resolve(value)
    })
  })
}

async function statusesOf(app: RunningApp, count: number, headers: Record<string, string> = {}): Promise<number[]> {
  const statuses: number[] = []
  for (let i = 0; i < count; i++) statuses.push((await get(app, '/ok', headers)).status)
  return statuses
}

let tmp: string
before(() => {
  tmp = mkdtempSync(join(tmpdir(), 'floodgate-http-rules-'))
})
after(() => rmSync(tmp, { recursive: true, force: true }))

/** A rules file of its own, a watcher on it, a limiter without policies of its own, and the framework's app. */
async function withRulesApp(
  framework: Framework,
  perIp: number,
  options: Omit<SharedOptions, 'limiter' | 'key'>,
  body: (app: RunningApp, file: string, watcher: RuleWatcher) => Promise<void>,
): Promise<void> {
  const file = join(mkdtempSync(join(tmp, `${framework.name}-`)), 'rules.yaml')
  writeFileSync(file, rulesYaml(perIp))
  const watcher = new RuleWatcher(file, { debounceMs: 20 })
  const limiter = new RateLimiter()
  const key = keys.fromRules({ rules: watcher, domain: 'web', descriptors: byIpUserAndPlan })
  const app = await framework.start({ limiter, key, onWarning: () => {}, ...options })
  try {
    await body(app, file, watcher)
  } finally {
    await app.close()
    await watcher.close()
    await limiter.store.close()
  }
}

for (const framework of FRAMEWORKS) {
  describe(`keys.fromRules through ${framework.name}`, () => {
    it('applies the limits of the rules file; a hot edit applies to the next requests; a broken edit keeps the old limits', async () => {
      await withRulesApp(framework, 2, {}, async (app, file, watcher) => {
        assert.deepEqual(await statusesOf(app, 3), [200, 200, 429])
        const denied = await get(app, '/ok')
        assert.equal(JSON.parse(denied.text).policy, 'per-ip')
        assert.equal(denied.headers.get('ratelimit-policy'), '"per-ip";q=2;w=60')

        const reloaded = next(watcher, 'reload')
        writeFileSync(file, rulesYaml(5))
        await reloaded
        // Same key, same policy name, higher limit: the two requests already counted still count.
        const afterEdit = await get(app, '/ok')
        assert.equal(afterEdit.status, 200)
        assert.equal(afterEdit.headers.get('ratelimit-policy'), '"per-ip";q=5;w=60')
        assert.deepEqual(await statusesOf(app, 3), [200, 200, 429])

        const failed = next(watcher, 'error')
        writeFileSync(file, rulesYaml(5).replace('limit: 5', 'limit: lots'))
        assert.match(String(await failed), /limit/)
        const stillLimited = await get(app, '/ok')
        assert.equal(stillLimited.status, 429)
        assert.equal(stillLimited.headers.get('ratelimit-policy'), '"per-ip";q=5;w=60')
      })
    })
  })
}

describe('keys.fromRules: which descriptors limit a request', () => {
  const [nodeFramework, expressFramework] = ['node', 'express'].map((name) => FRAMEWORKS.find((f) => f.name === name)!)

  it('every matched descriptor must admit; an unlimited rule adds no limit; a denial refunds the other keys', async () => {
    await withRulesApp(expressFramework, 10, {}, async (app) => {
      const alice = { 'x-user': 'alice' }
      assert.deepEqual(await statusesOf(app, 3, alice), [200, 200, 429])
      const denied = await get(app, '/ok', alice)
      assert.equal(JSON.parse(denied.text).policy, 'per-user')
      const policies = parseList(denied.headers.get('ratelimit-policy')!).map(([name]) => name)
      assert.deepEqual(policies, ['per-ip', 'per-user'])
      // Per IP: alice's 2 admitted requests counted, her 2 denied ones refunded; vip adds nothing but the IP.
      const vip = await get(app, '/ok', { 'x-user': 'vip' })
      assert.equal(vip.status, 200)
      assert.equal(vip.headers.get('ratelimit-policy'), '"per-ip";q=10;w=60')
      assert.equal(vip.headers.get('x-ratelimit-remaining'), '7')
    })
  })

  it('a request matching no limited rule passes with no headers', async () => {
    const rules = parseRules([
      {
        file: 'users.yaml',
        text:
          'domain: web\ndescriptors:\n  - key: user\n    limits: [{ name: per-user, algorithm: sliding-log, limit: 1, period: 1m }]\n' +
          '  - key: user\n    value: vip\n',
      },
    ])
    const limiter = new RateLimiter()
    const app = await nodeFramework.start({ limiter, key: keys.fromRules({ rules, domain: 'web', descriptors: byIpUserAndPlan }) })
    try {
      const requests: Record<string, string>[] = [{}, { 'x-user': 'vip' }, { 'x-user': 'vip' }, { 'x-plan': 'gold' }]
      for (const headers of requests) {
        const reply = await get(app, '/ok', headers)
        assert.equal(reply.status, 200)
        assert.equal(reply.headers.get('x-ratelimit-limit'), null)
        assert.equal(reply.headers.get('ratelimit-policy'), null)
      }
      assert.deepEqual(await statusesOf(app, 2, { 'x-user': 'bob' }), [200, 429])
    } finally {
      await app.close()
      await limiter.store.close()
    }
  })

  it('a shadow_mode rule is decided but never denies, and stays out of the headers', async () => {
    await withRulesApp(nodeFramework, 10, {}, async (app) => {
      for (let i = 0; i < 3; i++) {
        const reply = await get(app, '/decision', { 'x-plan': 'trial' })
        assert.equal(reply.status, 200)
        assert.equal(reply.headers.get('ratelimit-policy'), '"per-ip";q=10;w=60')
        assert.equal(JSON.parse(reply.text).shadow, i > 0)
      }
    })
  })

  it('remote_address is the client IP after trustProxy, IPv6 grouped by its /56', async () => {
    await withRulesApp(expressFramework, 1, { trustProxy: ['loopback'] }, async (app) => {
      const from = (address: string) => ({ 'x-forwarded-for': address })
      assert.deepEqual(await statusesOf(app, 2, from('198.51.100.1')), [200, 429])
      assert.deepEqual(await statusesOf(app, 1, from('198.51.100.2')), [200])
      assert.deepEqual(await statusesOf(app, 1, from('2001:db8:ab:cd01::1')), [200])
      assert.deepEqual(await statusesOf(app, 1, from('2001:db8:ab:cdff::2')), [429])
    })
  })
})

describe('keys.fromRules: the key generator itself', () => {
  const rules = parseRules([{ file: 'web.yaml', text: rulesYaml(3) }])
  const info = (headers: Record<string, string>, ip: string | undefined): RequestInfo => ({
    ip,
    method: 'GET',
    path: '/',
    route: undefined,
    header: (name) => headers[name.toLowerCase()],
  })

  it('yields the rule store keys and policies; reads a rules function per request', async () => {
    let current = rules
    const generate = keys.fromRules({ rules: () => current, domain: 'web', descriptors: byIpUserAndPlan })
    const parts = (await generate(undefined, info({ 'x-user': 'ann' }, '192.0.2.1'))) as KeyPart[]
    assert.deepEqual(
      parts.map((p) => [p.key, p.policies?.map((policy) => policy.name)]),
      [
        ['web|remote_address=192.0.2.1', ['per-ip']],
        ['web|user=ann', ['per-user']],
      ],
    )
    current = parseRules([{ file: 'web.yaml', text: 'domain: web\ndescriptors:\n  - key: user\n    value: ann\n' }])
    assert.equal(await generate(undefined, info({ 'x-user': 'ann' }, '192.0.2.1')), NOT_LIMITED)
  })

  it('drops descriptors with a missing entry, and hashes store keys a client could make long', async () => {
    const generate = keys.fromRules({ rules, domain: 'web', descriptors: byIpUserAndPlan })
    assert.equal(await generate(undefined, info({}, undefined)), NOT_LIMITED)
    const [part] = (await generate(undefined, info({ 'x-user': 'u'.repeat(300) }, undefined))) as KeyPart[]
    assert.match(part.key, /^sha256:[0-9a-f]{32}$/)
  })

  it('refuses a domain the rules do not define, and rules that are not rules, at setup', () => {
    const refused = (options: Parameters<typeof keys.fromRules>[0], message: RegExp) =>
      assert.throws(
        () => keys.fromRules(options),
        (error: unknown) => error instanceof FloodgateError && error.code === 'INVALID_OPTION' && message.test(error.message),
      )
    refused({ rules, domain: 'api', descriptors: byIpUserAndPlan }, /"api" is not a domain of the loaded rules \(they define "web"\)/)
    refused({ rules: {} as RuleSet, domain: 'web', descriptors: byIpUserAndPlan }, /must be a RuleSet/)
    refused({ rules, domain: '', descriptors: byIpUserAndPlan }, /domain: must be the non-empty domain/)
    refused({ rules, domain: 'web', descriptors: undefined as never }, /descriptors: must be a function/)
  })
})
