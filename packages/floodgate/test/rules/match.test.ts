// Matching: precedence at each level, full depth, allow-lists, unlimited and shadow rules, units
// (the rest: match-extensions.test.ts).

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import { parseRules, type RuleSet, type RuleSetOptions } from '../../src/rules.js'
import { d } from './support.js'

const rules = (text: string, options?: RuleSetOptions): RuleSet => parseRules([{ file: 'rules.yaml', text }], options)

const limitOf = (set: RuleSet, ...pairs: string[]): number | undefined => set.match('t', [d(...pairs)])[0]?.policies[0]?.limit

describe('matching precedence', () => {
  // Written least specific first: with `wildcardOrder: 'specific'` the order in the file must not matter.
  const text = `
domain: t
descriptors:
  - key: ip
    rate_limit: { unit: second, requests_per_unit: 1 }
  - key: ip
    value: "10.*"
    rate_limit: { unit: second, requests_per_unit: 2 }
  - key: ip
    value: "10.1.*"
    rate_limit: { unit: second, requests_per_unit: 3 }
  - key: ip
    value: 10.1.2.3
    rate_limit: { unit: second, requests_per_unit: 4 }
  - key: ip
    value: "*.9"
    rate_limit: { unit: second, requests_per_unit: 5 }
  - key: ip
    value: "*.8"
    rate_limit: { unit: second, requests_per_unit: 6 }
  - key: ip
    value: "1*.8"
    rate_limit: { unit: second, requests_per_unit: 7 }
`
  const set = rules(text, { wildcardOrder: 'specific' })
  const upstream = rules(text)

  it('exact key+value beats every wildcard, which beats the key alone', () => {
    assert.equal(limitOf(set, 'ip=10.1.2.3'), 4)
    assert.equal(limitOf(set, 'ip=10.1.2.4'), 3)
    assert.equal(limitOf(set, 'ip=10.2.2.4'), 2)
    assert.equal(limitOf(set, 'ip=192.0.2.1'), 1)
  })

  it('the wildcard with the most literal characters wins; equal ones go by file order', () => {
    // "10.1.*" (5 literal chars) over "10.*" (3) and "*.9" (2), whatever the order in the file.
    assert.equal(limitOf(set, 'ip=10.1.0.9'), 3)
    assert.equal(limitOf(set, 'ip=11.0.0.9'), 5)
    // "1*.8" (3 literal) beats "*.8" (2); "10.*" (3) ties with "1*.8" and was written first.
    assert.equal(limitOf(set, 'ip=12.0.0.8'), 7)
    assert.equal(limitOf(set, 'ip=10.0.0.8'), 2)
  })

  it('by default the first matching wildcard in file order wins, as upstream', () => {
    // "10.*" is written before "10.1.*" and "*.9": it takes 10.1.0.9 and 10.1.2.4.
    assert.equal(limitOf(upstream, 'ip=10.1.0.9'), 2)
    assert.equal(limitOf(upstream, 'ip=10.1.2.4'), 2)
    assert.equal(limitOf(upstream, 'ip=11.0.0.9'), 5)
    assert.equal(limitOf(upstream, 'ip=12.0.0.8'), 6)
    // Exact values still come before any wildcard, and the key alone after them.
    assert.equal(limitOf(upstream, 'ip=10.1.2.3'), 4)
    assert.equal(limitOf(upstream, 'ip=192.0.2.1'), 1)
  })

  it('ids name the config branch, never the request value', () => {
    const [a, b, c] = set.match('t', [d('ip=192.0.2.1'), d('ip=10.2.0.1'), d('ip=10.1.2.3')])
    assert.equal(a?.id, 't.ip')
    assert.equal(b?.id, 't.ip_10.*')
    assert.equal(c?.id, 't.ip_10.1.2.3')
  })

  it('`*` anywhere in a value matches zero or more characters', () => {
    const glob = rules(
      `
domain: t
descriptors:
  - key: path
    value: "/users/*/orders/*"
    rate_limit: { unit: second, requests_per_unit: 1 }
  - key: path
    value: "*"
    rate_limit: { unit: second, requests_per_unit: 2 }
  - key: path
    value: "/a**b"
    rate_limit: { unit: second, requests_per_unit: 3 }
`,
      { wildcardOrder: 'specific' },
    )
    assert.equal(limitOf(glob, 'path=/users/7/orders/9'), 1)
    assert.equal(limitOf(glob, 'path=/users//orders/'), 1)
    assert.equal(limitOf(glob, 'path=/users/7/orders'), 2)
    assert.equal(limitOf(glob, 'path=/ab'), 3)
    assert.equal(limitOf(glob, 'path='), 2)
  })

  it('agrees with a regular-expression reading of the pattern (property)', () => {
    const alphabet = fc.constantFrom('a', 'b', '.')
    fc.assert(
      fc.property(
        fc.array(fc.oneof(alphabet, fc.constant('*')), { minLength: 1, maxLength: 6 }).map((c) => c.join('')),
        fc.array(alphabet, { maxLength: 8 }).map((c) => c.join('')),
        (pattern, value) => {
          const set = rules(
            `domain: t\ndescriptors:\n  - key: k\n    value: ${JSON.stringify(pattern)}\n` +
              '    rate_limit: { unit: second, requests_per_unit: 1 }\n',
          )
          const regex = new RegExp(`^${pattern.replace(/\./g, '\\.').replace(/\*/g, '.*')}$`)
          assert.equal(set.match('t', [d(`k=${value}`)])[0] !== undefined, regex.test(value), `${pattern} vs ${value}`)
        },
      ),
      { numRuns: 300 },
    )
  })
})

describe('matching depth', () => {
  const set = rules(`
domain: t
descriptors:
  - key: a
    value: "1"
    rate_limit: { unit: second, requests_per_unit: 10 }
    descriptors:
      - key: b
        rate_limit: { unit: second, requests_per_unit: 20 }
  - key: a
    descriptors:
      - key: c
        rate_limit: { unit: second, requests_per_unit: 30 }
  - key: x
    value: "1"
    descriptors:
      - key: y
        rate_limit: { unit: second, requests_per_unit: 40 }
  - key: z
`)

  it('a request must match a branch to its full depth', () => {
    assert.equal(limitOf(set, 'a=1'), 10) // a limit on an inner node applies where the request ends
    assert.equal(limitOf(set, 'a=1', 'b=q'), 20)
    assert.equal(limitOf(set, 'a=2', 'c=q'), 30)
    assert.equal(limitOf(set, 'a=2'), undefined) // the key-only branch has no limit of its own
    assert.equal(limitOf(set, 'a=1', 'b=q', 'd=r'), undefined) // longer than the branch
    assert.equal(limitOf(set, 'x=1'), undefined) // a value with children but no limit is not an allow-list
    assert.equal(limitOf(set, 'x=1', 'y=2'), 40)
  })

  it('takes the most specific entry at each level without backtracking (as envoyproxy/ratelimit)', () => {
    // a=1 is found exactly; it has no child `c`, and the key-only `a` branch is not tried instead.
    assert.equal(limitOf(set, 'a=1', 'c=q'), undefined)
  })

  it('a key-only entry with neither limit nor children matches nothing', () => {
    assert.deepEqual(set.match('t', [d('z=1')]), [undefined])
  })

  it('unknown domains, unknown keys and empty descriptors match nothing', () => {
    assert.deepEqual(set.match('other', [d('a=1'), d('a=2', 'c=1')]), [undefined, undefined])
    assert.deepEqual(
      set.match('t', [d('nope=1'), [], d('a=1')]).map((r) => r?.id),
      [undefined, undefined, 't.a_1'],
    )
  })
})

describe('allow-lists, unlimited, shadow mode and units', () => {
  const set = rules(`
domain: t
descriptors:
  - key: ip
    rate_limit: { unit: Second, requests_per_unit: 1 }
  - key: ip
    value: "127.*"
  - key: client
    value: ops
    rate_limit:
      unlimited: true
  - key: trial
    shadow_mode: true
    detailed_metric: true
    rate_limit: { unit: MINUTE, requests_per_unit: 5, name: trial }
  - key: w
    rate_limit: { unit: week, requests_per_unit: 1 }
  - key: mo
    rate_limit: { unit: month, requests_per_unit: 1 }
  - key: y
    rate_limit: { unit: year, requests_per_unit: 1 }
  - key: h
    rate_limit: { unit: hour, requests_per_unit: 1 }
  - key: dd
    rate_limit: { unit: day, requests_per_unit: 1 }
`)

  it('a value with no limit and no children is allow-listed: unlimited, no policies', () => {
    const [rule] = set.match('t', [d('ip=127.0.0.1')])
    assert.equal(rule?.unlimited, true)
    assert.equal(rule?.allowListed, true)
    assert.deepEqual(rule?.policies, [])
    assert.equal(rule?.id, 't.ip_127.*')
  })

  it('`unlimited: true` is unlimited with no policies', () => {
    const [rule] = set.match('t', [d('client=ops')])
    assert.equal(rule?.unlimited, true)
    assert.equal(rule?.allowListed, undefined, 'explicitly unlimited, not allow-listed')
    assert.deepEqual(rule?.policies, [])
    assert.equal(rule?.envoyLimit, undefined)
  })

  it('shadow_mode marks the rule and its policies; detailed_metric is carried', () => {
    const [rule] = set.match('t', [d('trial=x')])
    assert.equal(rule?.shadow, true)
    assert.equal(rule?.detailedMetric, true)
    assert.equal(rule?.name, 'trial')
    assert.equal(rule?.policies[0].shadow, true)
    // The counter is named by the unit, not by the rule name or rate (upstream keys it so).
    assert.equal(rule?.policies[0].name, 'per-minute')
    const [plain] = set.match('t', [d('ip=1.1.1.1')])
    assert.equal(plain?.shadow, false)
    assert.equal(plain?.policies[0].shadow, false)
  })

  it('Envoy units become fixed windows: MONTH = 30 days, YEAR = 365 days, any letter case', () => {
    const periodOf = (pair: string) => set.match('t', [d(pair)])[0]?.policies[0]
    assert.deepEqual(
      ['ip=1', 'trial=1', 'h=1', 'dd=1', 'w=1', 'mo=1', 'y=1'].map((pair) => periodOf(pair)?.periodMs),
      [1_000, 60_000, 3_600_000, 86_400_000, 7 * 86_400_000, 30 * 86_400_000, 365 * 86_400_000],
    )
    assert.equal(periodOf('ip=1')?.algorithm, 'fixed-window')
    assert.deepEqual(set.match('t', [d('trial=1')])[0]?.envoyLimit, { unit: 'MINUTE', requestsPerUnit: 5 })
  })

  it("the policies handed out are frozen, so one request cannot change another's", () => {
    const [rule] = set.match('t', [d('ip=1.1.1.1')])
    assert.throws(() => rule?.policies.push(rule.policies[0]), TypeError)
  })
})
