// Conformance with envoyproxy/ratelimit's config behaviour (its test/config): which limit a descriptor
// gets, under which stats key, and which files are refused — checked through the running service
// with an official Envoy client, and through the loader for refused files. Configs are our own.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { ConfigError, parseRules } from 'floodgate/rules'
import { readSettings } from '../../src/service/settings.js'
import { scrape } from '../service/helpers.js'
import { desc, startConformance, unique, type Conformance } from './support.js'

const RULES = `
domain: cfg
descriptors:
  - key: key1
    value: value1
    descriptors:
      - key: subkey1
        rate_limit: { unit: second, requests_per_unit: 5 }
        metadata: { name: service_1 }
      - key: subkey1
        value: subvalue1
        rate_limit: { unit: second, requests_per_unit: 10 }
  - key: key2
    rate_limit: { unit: minute, requests_per_unit: 20 }
  - key: key3
    rate_limit: { unit: hour, requests_per_unit: 10 }
  - key: key4
    rate_limit: { unit: day, requests_per_unit: 10 }
  - key: key5
    rate_limit: { unit: week, requests_per_unit: 10 }
  - key: key6
    rate_limit: { unit: month, requests_per_unit: 10 }
  - key: key7
    rate_limit: { unit: year, requests_per_unit: 10 }
  - key: shadow
    shadow_mode: true
    rate_limit: { unit: day, requests_per_unit: 1 }
  - key: wild
    value: foo*
    rate_limit: { unit: minute, requests_per_unit: 20 }
  - key: noWild
    value: foo
    rate_limit: { unit: minute, requests_per_unit: 20 }
  - key: midWild
    value: bar*b
    rate_limit: { unit: minute, requests_per_unit: 20 }
  - key: multiWild
    value: foo*bar*baz
    rate_limit: { unit: minute, requests_per_unit: 10 }
  - key: order
    value: "a*"
    rate_limit: { unit: day, requests_per_unit: 1 }
  - key: order
    value: "ab*"
    rate_limit: { unit: day, requests_per_unit: 2 }
  - key: nestedWild
    value: val1
    descriptors:
      - key: wild
        value: goo*
        rate_limit: { unit: minute, requests_per_unit: 20 }
  - key: detailed
    detailed_metric: true
    descriptors:
      - key: inner
        detailed_metric: true
        rate_limit: { unit: day, requests_per_unit: 10 }
  - key: route
    value_to_metric: true
    descriptors:
      - key: http_method
        rate_limit: { unit: day, requests_per_unit: 10 }
  - key: k1
    descriptors:
      - key: k2
        value_to_metric: true
        descriptors:
          - key: k3
            rate_limit: { unit: day, requests_per_unit: 10 }
  - key: vroute
    value_to_metric: true
    descriptors:
      - key: vmethod
        value: GET
        value_to_metric: true
        descriptors:
          - key: vsubject
            rate_limit: { unit: day, requests_per_unit: 10 }
      - key: vmethod
        value_to_metric: true
        descriptors:
          - key: vsubject
            detailed_metric: true
            rate_limit: { unit: day, requests_per_unit: 10 }
  - key: vtmwild
    value: "api/*"
    value_to_metric: true
    rate_limit: { unit: day, requests_per_unit: 10 }
  - key: files
    value: "files/*"
    share_threshold: true
    rate_limit: { unit: day, requests_per_unit: 3 }
  - key: files
    value: "other/*"
    rate_limit: { unit: day, requests_per_unit: 3 }
`

describe('conformance: config (upstream test/config)', () => {
  let c: Conformance
  before(async () => {
    c = await startConformance('memory', RULES)
  })
  after(async () => {
    await c.stop()
  })

  const limitOf = async (pairs: Record<string, string>) =>
    (await c.client.shouldRateLimit({ domain: 'cfg', descriptors: [desc(pairs)] })).statuses[0]

  it('TestBasicConfig: nested key/value, key-only default, deeper request and intermediate levels', async () => {
    assert.equal(
      (await limitOf({ key1: 'value1', subkey1: unique('s') })).current_limit?.requests_per_unit,
      5,
      'key-only default at the 2nd level',
    )
    assert.equal(
      (await limitOf({ key1: 'value1', subkey1: 'subvalue1' })).current_limit?.requests_per_unit,
      10,
      'exact value wins over the key alone',
    )
    assert.equal((await limitOf({ key1: 'value1' })).current_limit, null, 'a level without rate_limit has no limit')
    assert.equal((await limitOf({ key1: 'value2', subkey1: 'x' })).current_limit, null, 'no match at the first level')
    assert.equal((await limitOf({ key2: unique('v'), extra: 'x' })).current_limit, null, 'a request deeper than the config matches nothing')
    const units = await Promise.all(
      ['key2', 'key3', 'key4', 'key5', 'key6', 'key7'].map(async (key) => (await limitOf({ [key]: unique('u') })).current_limit?.unit),
    )
    assert.deepEqual(units, ['MINUTE', 'HOUR', 'DAY', 'WEEK', 'MONTH', 'YEAR'])
    const other = await c.client.shouldRateLimit({ domain: 'nope', descriptors: [desc({ key2: 'x' })] })
    assert.deepEqual(
      other.statuses[0],
      { code: 'OK', current_limit: null, limit_remaining: 0, duration_until_reset: null },
      'an unknown domain has no limits',
    )
  })

  it('TestConfigLimitOverride: the override replaces the config limit, has no name, counts under domain.key_value', async () => {
    const value = unique('ov')
    const response = await c.client.shouldRateLimit({
      domain: 'cfg',
      descriptors: [desc({ key1: 'value1', subkey1: value }, { limit: { requests_per_unit: 42, unit: 'HOUR' } })],
    })
    assert.deepEqual(response.statuses[0].current_limit, { name: '', requests_per_unit: 42, unit: 'HOUR' })
    const metrics = await scrape(c.service.httpUrl)
    assert.equal(metrics.get(`floodgate_total_hits{rule="cfg.key1_value1.subkey1_${value}"}`), 1)
    const elsewhere = await c.client.shouldRateLimit({
      domain: 'unknown-domain',
      descriptors: [desc({ a: 'b' }, { limit: { requests_per_unit: 1, unit: 'HOUR' } })],
    })
    assert.equal(elsewhere.statuses[0].current_limit, null, 'no override outside a configured domain')
  })

  it('TestShadowModeConfig: shadow_mode answers OK while over the limit', async () => {
    const value = unique('sh')
    await limitOf({ shadow: value })
    const over = await c.client.shouldRateLimit({ domain: 'cfg', descriptors: [desc({ shadow: value })] })
    assert.equal(over.overall_code, 'OK')
    assert.equal(over.statuses[0].code, 'OK')
    assert.equal(over.statuses[0].limit_remaining, 0)
  })

  it('TestWildcardConfig: trailing, middle and multiple wildcards; no eager match of plain values', async () => {
    assert.equal((await limitOf({ wild: 'foo1' })).current_limit?.requests_per_unit, 20)
    assert.equal((await limitOf({ wild: 'bar' })).current_limit, null)
    assert.equal((await limitOf({ noWild: 'foo1' })).current_limit, null)
    assert.equal((await limitOf({ midWild: 'barab' })).current_limit?.requests_per_unit, 20)
    assert.equal((await limitOf({ midWild: 'barb' })).current_limit?.requests_per_unit, 20, '* matches the empty string')
    assert.equal((await limitOf({ midWild: 'bara' })).current_limit, null)
    assert.equal((await limitOf({ multiWild: 'foo-bar-baz' })).current_limit?.requests_per_unit, 10)
    assert.equal((await limitOf({ multiWild: 'foobazbar' })).current_limit, null)
    assert.equal((await limitOf({ nestedWild: 'val1', wild: 'goo2' })).current_limit?.requests_per_unit, 20)
  })

  it('TestWildcardConfig: the first matching wildcard in file order wins', async () => {
    assert.equal((await limitOf({ order: unique('abc') })).current_limit?.requests_per_unit, 1, '"a*" is written before "ab*"')
  })

  it("--wildcard-order specific: the most literal pattern wins instead (Floodgate's opt-in)", async () => {
    const specific = await startConformance('memory', RULES, ['--wildcard-order', 'specific'])
    try {
      const response = await specific.client.shouldRateLimit({ domain: 'cfg', descriptors: [desc({ order: unique('abc') })] })
      assert.equal(response.statuses[0].current_limit?.requests_per_unit, 2, '"ab*" has more literal characters than "a*"')
    } finally {
      await specific.stop()
    }
  })

  it('TestWildcardStatsBehavior: a wildcard match counts under its pattern, a key-only match under the key', async () => {
    await limitOf({ wild: 'foo-stats' })
    await limitOf({ nestedWild: 'val1', wild: 'goo-stats' })
    const metrics = await scrape(c.service.httpUrl)
    assert.ok((metrics.get('floodgate_total_hits{rule="cfg.wild_foo*"}') ?? 0) >= 1)
    assert.ok((metrics.get('floodgate_total_hits{rule="cfg.nestedWild_val1.wild_goo*"}') ?? 0) >= 1)
    for (const key of metrics.keys()) assert.ok(!key.includes('foo-stats') && !key.includes('goo-stats'), key)
  })

  it('TestDetailedMetric: detailed_metric counts under every request value', async () => {
    const value = unique('dm')
    await limitOf({ detailed: value, inner: 'x' })
    const metrics = await scrape(c.service.httpUrl)
    assert.equal(metrics.get(`floodgate_total_hits{rule="cfg.detailed_${value}.inner_x"}`), 1)
  })

  it("TestValueToMetric_UsesRuntimeValuesInStats: value_to_metric puts that level's value in the stats key", async () => {
    const value = unique('route')
    await limitOf({ route: value, http_method: 'GET' })
    const metrics = await scrape(c.service.httpUrl)
    assert.equal(metrics.get(`floodgate_total_hits{rule="cfg.route_${value}.http_method"}`), 1)
  })

  it('TestValueToMetric_MidLevelOnly, _WithConfiguredValues, _WithEmptyValue, _DoesNotOverrideDetailedMetric', async () => {
    const run = unique('v')
    await limitOf({ k1: 'X', k2: run, k3: 'Z' })
    await limitOf({ vroute: run, vmethod: 'GET', vsubject: 'user123' })
    await limitOf({ vroute: '', vmethod: 'GET', vsubject: 'user123' })
    await limitOf({ vroute: run, vmethod: 'PUT', vsubject: 'user9' })
    const metrics = await scrape(c.service.httpUrl)
    assert.equal(metrics.get(`floodgate_total_hits{rule="cfg.k1.k2_${run}.k3"}`), 1, 'only the flagged level names its value')
    assert.equal(
      metrics.get(`floodgate_total_hits{rule="cfg.vroute_${run}.vmethod_GET.vsubject"}`),
      1,
      'a configured value is named as written',
    )
    assert.ok((metrics.get('floodgate_total_hits{rule="cfg.vroute.vmethod_GET.vsubject"}') ?? 0) >= 1, 'an empty value adds only the key')
    assert.equal(
      metrics.get(`floodgate_total_hits{rule="cfg.vroute_${run}.vmethod_PUT.vsubject_user9"}`),
      1,
      'detailed_metric names every value',
    )
  })

  it('TestValueToMetric_WithWildcard: a wildcard level with value_to_metric names the runtime value', async () => {
    const value = `api/${unique('v')}`
    await limitOf({ vtmwild: value })
    const metrics = await scrape(c.service.httpUrl)
    assert.equal(metrics.get(`floodgate_total_hits{rule="cfg.vtmwild_${value}"}`), 1)
  })

  it('TestShareThreshold: values matching a share_threshold wildcard share one counter and one stats key', async () => {
    const run = unique('r')
    const answers = []
    for (const file of ['a', 'b', 'c', 'd']) answers.push(await limitOf({ files: `files/${run}/${file}` }))
    assert.deepEqual(
      answers.map((a) => a.code),
      ['OK', 'OK', 'OK', 'OVER_LIMIT'],
    )
    assert.deepEqual(
      answers.map((a) => a.limit_remaining),
      [2, 1, 0, 0],
    )
    // Without share_threshold every value has its own counter.
    const separate = [await limitOf({ files: `other/${run}/a` }), await limitOf({ files: `other/${run}/b` })]
    assert.deepEqual(
      separate.map((a) => a.limit_remaining),
      [2, 2],
    )
    const metrics = await scrape(c.service.httpUrl)
    assert.ok((metrics.get('floodgate_total_hits{rule="cfg.files_files/*"}') ?? 0) >= 4)
  })
})

describe('conformance: refused configs (upstream test/config error cases), with file and line', () => {
  const refused = (yaml: string): ConfigError => {
    try {
      parseRules([{ file: 'rules.yaml', text: yaml }])
    } catch (error) {
      if (error instanceof ConfigError) return error
      throw error
    }
    assert.fail('the config was accepted')
  }
  const cases: [string, string, number, RegExp][] = [
    ['TestEmptyDomain', 'descriptors:\n  - key: a\n', 1, /missing domain/],
    ['TestEmptyKey', 'domain: d\ndescriptors:\n  - value: v\n', 3, /descriptor has no key/],
    ['TestDuplicateKey', 'domain: d\ndescriptors:\n  - key: a\n    value: v\n  - key: a\n    value: v\n', 5, /duplicate descriptor/],
    [
      'TestBadLimitUnit',
      'domain: d\ndescriptors:\n  - key: a\n    rate_limit: { unit: fortnight, requests_per_unit: 1 }\n',
      4,
      /unknown unit "fortnight"/,
    ],
    [
      'TestReplacesSelf',
      'domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      name: me\n' +
        '      unit: second\n      requests_per_unit: 1\n      replaces: [{ name: me }]\n',
      8,
      /replaces names this rule itself/,
    ],
    [
      'TestReplacesEmpty',
      'domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n' +
        '      unit: second\n      requests_per_unit: 1\n      replaces: [{ name: "" }]\n',
      7,
      /non-empty `name`/,
    ],
    ['TestBadYaml', 'domain: d\ndescriptors:\n  - key: "a\n', 4, /malformed YAML: Missing closing/],
    [
      'TestMisspelledKey',
      'domain: d\ndescriptors:\n  - key: a\n    ratelimit: { unit: second, requests_per_unit: 1 }\n',
      4,
      /unknown key "ratelimit"/,
    ],
    ['TestNonStringKey', 'domain: d\ndescriptors:\n  - key: a\n    1.5: x\n', 4, /unknown key "1.5"/],
    ['TestNonMapList', 'domain: d\ndescriptors:\n  - a\n', 3, /expected a descriptor mapping/],
    [
      'TestUnlimitedWithRateLimitUnit',
      'domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unlimited: true\n      unit: day\n',
      6,
      /takes no unit/,
    ],
  ]
  for (const [name, yaml, line, message] of cases) {
    it(`${name}: refused, naming rules.yaml:${line}`, () => {
      const error = refused(yaml)
      assert.ok(
        error.issues.some((issue) => issue.line === line && message.test(issue.message)),
        JSON.stringify(error.issues),
      )
    })
  }

  it('TestDuplicateDomain: a domain in two files is refused, naming both', () => {
    assert.throws(
      () =>
        parseRules([
          { file: 'a.yaml', text: 'domain: d\ndescriptors: []\n' },
          { file: 'b.yaml', text: 'domain: d\ndescriptors: []\n' },
        ]),
      (error: ConfigError) => error.issues[0].file === 'b.yaml' && /already defined in a\.yaml:1/.test(error.issues[0].message),
    )
  })

  it('TestDomainMerge: MERGE_DOMAIN_CONFIG merges the descriptors of a domain spread over files', () => {
    assert.equal(readSettings(['rules.yaml'], { MERGE_DOMAIN_CONFIG: 'true' }).mergeDomains, true)
    const rule = (key: string) => `  - key: ${key}\n    rate_limit: { unit: second, requests_per_unit: 1 }\n`
    const set = parseRules(
      [
        { file: 'a.yaml', text: `domain: d\ndescriptors:\n${rule('one')}` },
        { file: 'b.yaml', text: `domain: d\ndescriptors:\n${rule('two')}` },
      ],
      { mergeDomains: true },
    )
    assert.ok(set.match('d', [[{ key: 'one', value: 'v' }]])[0])
    assert.ok(set.match('d', [[{ key: 'two', value: 'v' }]])[0])
  })

  it('TestDuplicateKeyDomainMerge: a descriptor defined in two merged files is refused, naming both', () => {
    const rule = '  - key: one\n    rate_limit: { unit: second, requests_per_unit: 1 }\n'
    assert.throws(
      () =>
        parseRules(
          [
            { file: 'a.yaml', text: `domain: d\ndescriptors:\n${rule}` },
            { file: 'b.yaml', text: `domain: d\ndescriptors:\n${rule}` },
          ],
          { mergeDomains: true },
        ),
      (error: ConfigError) => error.issues[0].file === 'b.yaml' && /a\.yaml:3/.test(error.issues[0].message),
    )
  })

  it('TestMetadata: metadata is accepted free-form on descriptors', () => {
    const set = parseRules([
      {
        file: 'm.yaml',
        text:
          'domain: d\ndescriptors:\n  - key: a\n    metadata: { x: { y: [1, 2] } }\n' +
          '    rate_limit: { unit: second, requests_per_unit: 1 }\n',
      },
    ])
    assert.deepEqual(set.match('d', [[{ key: 'a', value: 'v' }]])[0]?.metadata, { x: { y: [1, 2] } })
  })
})
