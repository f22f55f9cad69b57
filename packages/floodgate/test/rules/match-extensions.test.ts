// Matching beyond precedence and depth: tiers and `limits:`, replaces, store keys, describe(), zero limits, upstream's descriptor options.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import { parseRules, storeKeyOf, type DescriptorEntry, type RuleSet, type RuleSetOptions } from '../../src/rules.js'
import { d } from './support.js'

const rules = (text: string, options?: RuleSetOptions): RuleSet => parseRules([{ file: 'rules.yaml', text }], options)

describe('tiers and the `limits:` extension', () => {
  const set = rules(`
domain: t
descriptors:
  - key: plan
    value: free
    descriptors:
      - key: user
        limits:
          - { name: burst, algorithm: token-bucket, limit: 5, period: 1s, burst: 10 }
          - { name: sustained, algorithm: sliding-window, limit: 1000, period: 1h }
  - key: plan
    value: premium
    descriptors:
      - key: user
        shadow_mode: true
        limits:
          - { name: burst, algorithm: gcra, limit: 50, period: 1000, burst: 100, blockMs: 30s }
          - { algorithm: leaky-bucket, limit: 10, period: 1s, shaping: true }
`)

  it('each plan gets its own policies for the same user key', () => {
    const [free, premium, none, gold] = set.match('t', [
      d('plan=free', 'user=ann'),
      d('plan=premium', 'user=ann'),
      d('plan=free'),
      d('plan=gold', 'user=ann'),
    ])
    assert.deepEqual(
      free?.policies.map((p) => [p.name, p.algorithm, p.limit, p.periodMs, p.burst]),
      [
        ['burst', 'token-bucket', 5, 1000, 10],
        ['sustained', 'sliding-window', 1000, 3_600_000, 1000],
      ],
    )
    assert.equal(free?.id, 't.plan_free.user')
    assert.equal(free?.storeKey, 't|plan=free|user=ann')
    assert.deepEqual(
      premium?.policies.map((p) => [p.name, p.algorithm, p.limit, p.blockMs]),
      [
        ['burst', 'gcra', 50, 30_000],
        ['leaky-bucket-10-per-1s', 'leaky-bucket', 10, 0],
      ],
    )
    assert.equal(premium?.policies[1].shaping, true)
    assert.equal(none, undefined)
    assert.equal(gold, undefined)
  })

  it('shadow_mode on a `limits:` descriptor makes every policy shadow', () => {
    const [premium] = set.match('t', [d('plan=premium', 'user=ann')])
    assert.equal(premium?.shadow, true)
    assert.deepEqual(
      premium?.policies.map((p) => p.shadow),
      [true, true],
    )
    assert.equal(premium?.envoyLimit, undefined)
    assert.equal(premium?.name, undefined)
  })
})

describe('replaces', () => {
  const set = rules(`
domain: t
descriptors:
  - key: user
    rate_limit: { name: per_user, unit: minute, requests_per_unit: 10 }
  - key: partner
    rate_limit:
      name: partner
      unit: minute
      requests_per_unit: 1000
      replaces: [{ name: per_user }, { name: burst }]
  - key: tier
    limits:
      - { name: burst, algorithm: gcra, limit: 5, period: 1s }
      - { name: daily, algorithm: fixed-window, limit: 500, period: 1d }
  - key: solo
    limits:
      - { name: burst, algorithm: gcra, limit: 5, period: 1s }
  - key: user2
    rate_limit: { unlimited: true, name: per_user }
`)

  it('a matched rule with replaces drops the named rule from the other descriptors', () => {
    const [user, partner] = set.match('t', [d('user=ann'), d('partner=acme')])
    assert.equal(user, undefined)
    assert.equal(partner?.name, 'partner')
    assert.equal(set.match('t', [d('user=ann')])[0]?.name, 'per_user') // untouched without the partner
  })

  it('drops a policy of that name from `limits:` rules, and the rule when none is left', () => {
    const [tier, solo] = set.match('t', [d('tier=x'), d('solo=y'), d('partner=acme')])
    assert.deepEqual(
      tier?.policies.map((p) => p.name),
      ['daily'],
    )
    assert.equal(solo, undefined)
    assert.deepEqual(
      set.match('t', [d('tier=x')])[0]?.policies.map((p) => p.name),
      ['burst', 'daily'],
    )
  })

  it('unlimited rules stay unlimited whatever is replaced', () => {
    const [user2] = set.match('t', [d('user2=ann'), d('partner=acme')])
    assert.equal(user2?.unlimited, true)
  })
})

describe('store keys', () => {
  const set = rules(`
domain: t
descriptors:
  - key: ip
    rate_limit: { unit: second, requests_per_unit: 1 }
  - key: ip
    value: "10.*"
    rate_limit: { unit: second, requests_per_unit: 1 }
`)

  it('key-only and wildcard matches count per actual request value', () => {
    const keys = set.match('t', [d('ip=1.1.1.1'), d('ip=2.2.2.2'), d('ip=10.0.0.1'), d('ip=10.0.0.2')]).map((r) => r?.storeKey)
    assert.deepEqual(keys, ['t|ip=1.1.1.1', 't|ip=2.2.2.2', 't|ip=10.0.0.1', 't|ip=10.0.0.2'])
  })

  it('separators inside values are escaped', () => {
    assert.equal(storeKeyOf('t', d('k=a|x=b')), 't|k=a\\|x\\=b')
    assert.notEqual(storeKeyOf('t', d('k=a|x=b')), storeKeyOf('t', d('k=a', 'x=b')))
    assert.notEqual(storeKeyOf('t|k=a', []), storeKeyOf('t', d('k=a')))
  })

  it('two different (domain, entries) never share a key (property)', () => {
    const text = fc.array(fc.constantFrom('a', '|', '=', '\\'), { maxLength: 4 }).map((c) => c.join(''))
    const entries = fc.array(fc.record({ key: text, value: text }), { maxLength: 3 })
    fc.assert(
      fc.property(text, entries, text, entries, (domainA, a: DescriptorEntry[], domainB, b: DescriptorEntry[]) => {
        // By content: fc.record makes some entries without a prototype, which deepEqual tells apart.
        const plain = (entries: DescriptorEntry[]) => entries.map(({ key, value }) => ({ key, value }))
        if (storeKeyOf(domainA, a) === storeKeyOf(domainB, b)) assert.deepEqual([domainA, plain(a)], [domainB, plain(b)])
      }),
      { numRuns: 2_000 },
    )
  })
})

describe('describe()', () => {
  it('returns a JSON-friendly tree with ids, lines and policies', () => {
    const set = rules(`domain: t
descriptors:
  - key: plan
    value: free
    descriptors:
      - key: user
        limits:
          - { name: burst, algorithm: gcra, limit: 5, period: 1s }
  - key: ip
    rate_limit: { unit: second, requests_per_unit: 3, replaces: [{ name: x }] }
`)
    const description = JSON.parse(JSON.stringify(set.describe()))
    assert.deepEqual(description.files, ['rules.yaml'])
    const [domain] = description.domains
    assert.equal(domain.domain, 't')
    assert.equal(domain.line, 1)
    assert.equal(domain.descriptors[0].line, 3)
    assert.equal(domain.descriptors[0].rule, undefined)
    assert.equal(domain.descriptors[0].descriptors[0].rule.id, 't.plan_free.user')
    assert.equal(domain.descriptors[0].descriptors[0].rule.policies[0].algorithm, 'gcra')
    assert.deepEqual(domain.descriptors[1].rule.envoyLimit, { unit: 'SECOND', requestsPerUnit: 3 })
    assert.deepEqual(domain.descriptors[1].rule.replaces, ['x'])
  })
})

describe('requests_per_unit: 0', () => {
  it('loads as a fixed window that denies every request, as envoyproxy/ratelimit does', async () => {
    const set = rules(`
domain: t
descriptors:
  - key: banned
    rate_limit: { unit: minute, requests_per_unit: 0 }
`)
    const [rule] = set.match('t', [d('banned=1.2.3.4')])
    assert.equal(rule?.policies[0]?.limit, 0)
    assert.equal(rule?.policies[0]?.algorithm, 'fixed-window')
    const { fixedWindow } = await import('../../src/core/algorithms/fixed-window.js')
    const now = 1_700_000_000_000
    const step = fixedWindow.step(undefined, now, 1, rule!.policies[0]!)
    assert.equal(step.allowed, false)
    assert.equal(step.retryAfterMs, 60_000 - (now % 60_000))
  })
})

describe('upstream descriptor options: share_threshold, value_to_metric, detailed_metric, quota_mode, metadata', () => {
  const set = rules(`
domain: t
descriptors:
  - key: files
    value: "files/*"
    share_threshold: true
    rate_limit: { unit: minute, requests_per_unit: 100 }
  - key: route
    value_to_metric: true
    descriptors:
      - key: method
        rate_limit: { unit: minute, requests_per_unit: 5 }
  - key: user
    detailed_metric: true
    rate_limit: { unit: minute, requests_per_unit: 5 }
  - key: quota
    quota_mode: true
    metadata: { service: { name: billing } }
    rate_limit: { unit: hour, requests_per_unit: 5 }
  - key: a
    rate_limit: { unit: second, requests_per_unit: 1, name: a }
  - key: free
    rate_limit: { unlimited: true, replaces: [{ name: a }] }
`)

  it('share_threshold: every value the pattern matches shares one counter; the stats key keeps the pattern', () => {
    const [x, y] = set.match('t', [d('files=files/a.txt'), d('files=files/b/c')])
    assert.equal(x?.storeKey, y?.storeKey)
    assert.equal(x?.storeKey, storeKeyOf('t', d('files=files/*')))
    assert.equal(x?.metricKey, 't.files_files/*')
  })

  it('value_to_metric: the stats key names the request value at that level', () => {
    const [rule] = set.match('t', [d('route=/orders', 'method=GET')])
    assert.equal(rule?.id, 't.route.method')
    assert.equal(rule?.metricKey, 't.route_/orders.method')
  })

  it('detailed_metric: the stats key names every value of the request', () => {
    const [rule] = set.match('t', [d('user=alice')])
    assert.equal(rule?.metricKey, 't.user_alice')
    assert.equal(rule?.id, 't.user')
  })

  it('quota_mode and metadata are carried to the matched rule', () => {
    const [rule] = set.match('t', [d('quota=q1')])
    assert.equal(rule?.quota, true)
    assert.deepEqual(rule?.metadata, { service: { name: 'billing' } })
    assert.equal(set.match('t', [d('a=1')])[0]?.quota, false)
  })

  it('an unlimited rule with replaces drops the replaced rule', () => {
    const [a, free] = set.match('t', [d('a=1'), d('free=1')])
    assert.equal(a, undefined)
    assert.equal(free?.unlimited, true)
    assert.notEqual(set.match('t', [d('a=1')])[0], undefined)
  })
})

describe('requests_per_unit: 0', () => {
  it('is accepted, as upstream: a fixed window of limit 0 (README: every charged hit is over)', () => {
    const set = rules('domain: t\ndescriptors:\n  - key: a\n    rate_limit: { unit: second, requests_per_unit: 0 }\n')
    const [rule] = set.match('t', [d('a=1')])
    assert.equal(rule?.policies[0].limit, 0)
    assert.deepEqual(rule?.envoyLimit, { unit: 'SECOND', requestsPerUnit: 0 })
  })
})
