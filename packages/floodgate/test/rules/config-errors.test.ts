// Every config error names the file, the line, the path in the tree and what to change.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { formatIssue, parseRules } from '../../src/rules.js'
import { configErrorOf, issueAt, issuesOf } from './support.js'

/** Joins lines so that element i is line i + 1, which keeps expected line numbers obvious. */
const lines = (...text: string[]): string => `${text.join('\n')}\n`

describe('config errors', () => {
  it('malformed YAML: the parser error with its line', () => {
    const issues = issuesOf(lines('domain: edge', 'descriptors:', '  - key: a', '    value: [1, 2', '  - key: b'), 'bad.yaml')
    assert.ok(issues.length >= 1)
    assert.equal(issues[0].file, 'bad.yaml')
    assert.equal(issues[0].path, '')
    assert.match(issues[0].message, /^malformed YAML: /)
    assert.ok(issues[0].line !== undefined && issues[0].line >= 4, `line ${issues[0].line}`)
  })

  it('malformed YAML: a duplicate mapping key is reported on its line', () => {
    const issues = issuesOf(lines('domain: edge', 'descriptors:', '  - key: a', '    key: b'))
    assert.equal(issues.length, 1)
    assert.equal(issues[0].line, 4)
    assert.match(issues[0].message, /Map keys must be unique/)
  })

  it('several YAML documents in one file', () => {
    const issues = issuesOf(lines('domain: a', '---', 'domain: b'))
    assert.equal(issues.length, 1)
    assert.equal(issues[0].line, 2)
    assert.match(issues[0].message, /a rules file holds one domain; put each `---` document in a file of its own/)
  })

  it('unknown keys at every level, with the known keys listed and a near miss suggested', () => {
    const issues = issuesOf(
      lines(
        'domain: edge',
        'descriptor:', // 2
        '  - key: a',
        'descriptors:',
        '  - key: a',
        '    rate_limits:', // 6
        '      unit: second',
        '  - key: b',
        '    rate_limit:',
        '      unit: second',
        '      requests_per_second: 5', // 11
        '      requests_per_unit: 5',
        '      replaces:',
        '        - name: x',
        '          nme: y', // 15
      ),
    )
    const root = issueAt(issues, 'descriptor')
    assert.equal(root.line, 2)
    assert.equal(root.column, 1)
    assert.match(root.message, /unknown key "descriptor" \(did you mean "descriptors"\?\); known keys here are domain, descriptors/)

    const descriptor = issueAt(issues, 'descriptors[0].rate_limits')
    assert.equal(descriptor.line, 6)
    assert.match(descriptor.message, /did you mean "rate_limit"/)
    assert.match(descriptor.message, /known keys here are key, value, rate_limit, limits, descriptors, shadow_mode, detailed_metric/)

    const rateLimit = issueAt(issues, 'descriptors[1].rate_limit.requests_per_second')
    assert.equal(rateLimit.line, 11)
    assert.match(rateLimit.message, /known keys here are unit, requests_per_unit, unlimited, name, replaces/)

    const replaces = issueAt(issues, 'descriptors[1].rate_limit.replaces[0].nme')
    assert.equal(replaces.line, 15)
    assert.match(replaces.message, /known keys here are name/)
  })

  it('missing, empty and non-string domain', () => {
    const missing = issueAt(issuesOf(lines('descriptors: []')), 'domain')
    assert.equal(missing.line, 1)
    assert.match(missing.message, /missing domain; add `domain: <name>`/)

    const empty = issueAt(issuesOf(lines('# rules', 'domain: ""', 'descriptors: []')), 'domain')
    assert.equal(empty.line, 2)
    assert.match(empty.message, /domain must be a non-empty string/)

    const list = issueAt(issuesOf(lines('domain: [a, b]')), 'domain')
    assert.match(list.message, /non-empty string/)
  })

  it('an empty file, and a file that is not a mapping', () => {
    const empty = issuesOf('', 'empty.yaml')
    assert.equal(empty.length, 1)
    assert.equal(empty[0].file, 'empty.yaml')
    assert.match(empty[0].message, /the file is empty/)

    const scalar = issuesOf(lines('just text'))
    assert.equal(scalar[0].line, 1)
    assert.match(scalar[0].message, /expected a mapping with `domain` and `descriptors`/)
  })

  it('missing and empty descriptor key', () => {
    const issues = issuesOf(
      lines(
        'domain: edge',
        'descriptors:',
        '  - value: x', // 3
        '    rate_limit: { unit: second, requests_per_unit: 1 }',
        '  - key: ""', // 5
      ),
    )
    const missing = issueAt(issues, 'descriptors[0].key')
    assert.equal(missing.line, 3)
    assert.match(missing.message, /descriptor has no key; add `key: <descriptor key>`/)
    const empty = issueAt(issues, 'descriptors[1].key')
    assert.equal(empty.line, 5)
    assert.match(empty.message, /descriptor key must be a non-empty string/)
  })

  it('duplicate key+value and duplicate key-only entries at one level, nested too', () => {
    const issues = issuesOf(
      lines(
        'domain: edge',
        'descriptors:',
        '  - key: a', // 3
        '    value: "1"',
        '  - key: a',
        '    value: 1', // the same value written as a number
        '  - key: b', // 7
        '  - key: b',
        '  - key: c',
        '    descriptors:',
        '      - key: d', // 11
        '        value: x',
        '      - key: d', // 13
        '        value: x',
      ),
    )
    const kv = issueAt(issues, 'descriptors[1]')
    assert.equal(kv.line, 5)
    assert.match(kv.message, /duplicate descriptor: key "a" with value "1" already appears at this level \(line 3\); merge the two entries/)
    const keyOnly = issueAt(issues, 'descriptors[3]')
    assert.equal(keyOnly.line, 8)
    assert.match(keyOnly.message, /key "b" without a value already appears at this level \(line 7\)/)
    const nested = issueAt(issues, 'descriptors[4].descriptors[1]')
    assert.equal(nested.line, 13)
    assert.match(nested.message, /\(line 11\)/)
  })

  it('the same key with and without a value, or with different values, is not a duplicate', () => {
    const rules = parseRules([
      {
        file: 'ok.yaml',
        text: lines('domain: edge', 'descriptors:', '  - key: a', '  - key: a', '    value: x', '  - key: a', '    value: y'),
      },
    ])
    assert.deepEqual([...rules.domains], ['edge'])
  })

  it('unknown unit, with a suggestion and the accepted units', () => {
    const issues = issuesOf(
      lines('domain: edge', 'descriptors:', '  - key: a', '    rate_limit:', '      unit: seconds', '      requests_per_unit: 5'),
    )
    const unit = issueAt(issues, 'descriptors[0].rate_limit.unit')
    assert.equal(unit.line, 5)
    assert.equal(unit.column, 13)
    assert.match(
      unit.message,
      /unknown unit "seconds" \(did you mean "SECOND"\?\); use one of SECOND, MINUTE, HOUR, DAY, WEEK, MONTH, YEAR \(any case\)/,
    )
  })

  it('missing unit and missing requests_per_unit', () => {
    const issues = issuesOf(
      lines('domain: edge', 'descriptors:', '  - key: a', '    rate_limit:', '      name: x', '  - key: b', '    rate_limit: {}'),
    )
    const unit = issueAt(issues, 'descriptors[0].rate_limit.unit')
    assert.equal(unit.line, 5)
    assert.match(unit.message, /missing unit; add `unit: <SECOND, .*>`, or write `unlimited: true`/)
    const count = issueAt(issues, 'descriptors[0].rate_limit.requests_per_unit')
    assert.equal(count.line, 5)
    assert.match(count.message, /missing requests_per_unit; add `requests_per_unit: <whole number ≥ 0>`/)
    assert.equal(issueAt(issues, 'descriptors[1].rate_limit.unit').line, 7)
    assert.equal(issueAt(issues, 'descriptors[1].rate_limit.requests_per_unit').line, 7)
  })

  it('requests_per_unit that is not a whole number ≥ 0', () => {
    const issues = issuesOf(
      lines(
        'domain: edge',
        'descriptors:',
        '  - key: a',
        '    rate_limit: { unit: second, requests_per_unit: 2.5 }', // 4
        '  - key: b',
        '    rate_limit: { unit: second, requests_per_unit: ten }', // 6
        '  - key: c',
        '    rate_limit: { unit: second, requests_per_unit: -1 }', // 8
      ),
    )
    const fraction = issueAt(issues, 'descriptors[0].rate_limit.requests_per_unit')
    assert.equal(fraction.line, 4)
    assert.match(fraction.message, /must be a whole number from 0 \(deny all\) to 4294967295, got "2.5"/)
    assert.match(issueAt(issues, 'descriptors[1].rate_limit.requests_per_unit').message, /got "ten"/)
    const negative = issueAt(issues, 'descriptors[2].rate_limit.requests_per_unit')
    assert.equal(negative.line, 8)
    assert.match(negative.message, /got "-1"/)
  })

  it('unlimited together with a unit is refused; a requests_per_unit beside it is ignored, as upstream', () => {
    const issues = issuesOf(
      lines(
        'domain: edge',
        'descriptors:',
        '  - key: a',
        '    rate_limit:',
        '      unlimited: true',
        '      unit: second', // 6
        '      requests_per_unit: 10', // 7
      ),
    )
    assert.equal(issues.length, 1)
    const unit = issueAt(issues, 'descriptors[0].rate_limit.unit')
    assert.equal(unit.line, 6)
    assert.match(unit.message, /`unlimited: true` takes no unit; remove `unit` or set `unlimited: false`/)
    const set = parseRules([
      {
        file: 'u.yaml',
        text: lines('domain: edge', 'descriptors:', '  - key: a', '    rate_limit: { unlimited: true, requests_per_unit: 10 }'),
      },
    ])
    assert.equal(set.match('edge', [[{ key: 'a', value: 'x' }]])[0]?.unlimited, true)
  })

  it('share_threshold on a value without a wildcard', () => {
    const issues = issuesOf(
      lines(
        'domain: edge',
        'descriptors:',
        '  - key: a',
        '    value: plain',
        '    share_threshold: true',
        '    rate_limit: { unit: second, requests_per_unit: 1 }',
      ),
    )
    const issue = issueAt(issues, 'descriptors[0].share_threshold')
    assert.equal(issue.line, 5)
    assert.match(issue.message, /only to a wildcard value/)
  })

  it('metadata that is not a mapping', () => {
    const issues = issuesOf(
      lines('domain: edge', 'descriptors:', '  - key: a', '    metadata: [1, 2]', '    rate_limit: { unit: second, requests_per_unit: 1 }'),
    )
    assert.equal(issueAt(issues, 'descriptors[0].metadata').line, 4)
  })

  it('replaces naming its own rule, or with an empty name', () => {
    const issues = issuesOf(
      lines(
        'domain: edge',
        'descriptors:',
        '  - key: a',
        '    rate_limit:',
        '      name: mine',
        '      unit: second',
        '      requests_per_unit: 1',
        '      replaces:',
        '        - name: other',
        '        - name: mine', // 10
        '        - name: ""', // 11
      ),
    )
    const own = issueAt(issues, 'descriptors[0].rate_limit.replaces[1].name')
    assert.equal(own.line, 10)
    assert.match(own.message, /replaces names this rule itself \("mine"\); name a rate_limit of another descriptor/)
    const empty = issueAt(issues, 'descriptors[0].rate_limit.replaces[2].name')
    assert.equal(empty.line, 11)
    assert.match(empty.message, /needs a non-empty `name`/)
  })

  it('rate_limit and limits on one descriptor', () => {
    const issues = issuesOf(
      lines(
        'domain: edge',
        'descriptors:',
        '  - key: a',
        '    rate_limit: { unit: second, requests_per_unit: 1 }',
        '    limits:', // 5
        "      - { algorithm: gcra, limit: 1, period: '1s' }",
      ),
    )
    const both = issueAt(issues, 'descriptors[0].limits')
    assert.equal(both.line, 5)
    assert.match(both.message, /either `rate_limit` \(Envoy style\) or `limits` \(Floodgate policies\), not both/)
  })

  it('`sync` in limits: a mode unsound for the algorithm, and mixed modes on one key', () => {
    const issues = issuesOf(
      lines(
        'domain: edge',
        'descriptors:',
        '  - key: a',
        '    limits:',
        '      - { algorithm: sliding-log, limit: 10, period: 1s, sync: lease }', // 5
        '  - key: b',
        '    limits:',
        '      - { name: x, algorithm: gcra, limit: 10, period: 1s, sync: lease, leaseMs: 200ms }',
        '      - { name: y, algorithm: fixed-window, limit: 100, period: 1m }', // 9
      ),
    )
    const unsound = issueAt(issues, 'descriptors[0].limits[0].sync')
    assert.equal(unsound.line, 5)
    assert.match(unsound.message, /lease is not sound for this policy: sliding-log/)
    const mixed = issueAt(issues, 'descriptors[1].limits[1].sync')
    assert.equal(mixed.line, 9)
    assert.match(mixed.message, /is always but x is lease/)
  })

  it('bad `limits:` values: each mapped to its field and line by the core policy validation', () => {
    const issues = issuesOf(
      lines(
        'domain: edge',
        'descriptors:',
        '  - key: a',
        '    limits:',
        '      - algorithm: gcra',
        '        limit: 10',
        '        period: 10 parsecs', // 7
        '      - { algorithm: bucket, limit: 1, period: 1s }', // 8
        '      - { algorithm: gcra, limit: 1, period: 1s, burts: 3 }', // 9
        '      - { algorithm: gcra, limit: 5, period: 1s, mode: elastic }', // 10
        '  - key: b',
        '    limits: []', // 12
        '  - key: c',
        '    limits:',
        '      - { name: x, algorithm: gcra, limit: 1, period: 1s }',
        '      - { name: x, algorithm: token-bucket, limit: 1, period: 1m }', // 16
        '  - key: d',
        '    limits:',
        '      - just-a-string', // 19
      ),
    )
    const period = issueAt(issues, 'descriptors[0].limits[0].period')
    assert.equal(period.line, 7)
    assert.equal(period.column, 17)
    assert.match(period.message, /"10 parsecs" is not a duration; .*"30s"/)
    const algorithm = issueAt(issues, 'descriptors[0].limits[1].algorithm')
    assert.equal(algorithm.line, 8)
    assert.match(algorithm.message, /unknown algorithm "bucket"; use one of fixed-window, sliding-window/)
    const unknown = issueAt(issues, 'descriptors[0].limits[2].burts')
    assert.equal(unknown.line, 9)
    assert.match(unknown.message, /unknown option; known options are name, algorithm/)
    const ceiling = issueAt(issues, 'descriptors[0].limits[3].ceiling')
    assert.equal(ceiling.line, 10)
    assert.match(ceiling.message, /whole number greater than 0/)
    const empty = issueAt(issues, 'descriptors[1].limits')
    assert.equal(empty.line, 12)
    assert.match(empty.message, /expected a non-empty list of policies/)
    const duplicate = issueAt(issues, 'descriptors[2].limits[1].name')
    assert.equal(duplicate.line, 16)
    assert.match(duplicate.message, /duplicate policy name "x" \(also limits\[0\]\)/)
    const scalar = issueAt(issues, 'descriptors[3].limits[0]')
    assert.equal(scalar.line, 19)
    assert.match(scalar.message, /expected a policy mapping/)
  })

  it('wrong types: booleans, lists, mappings', () => {
    const issues = issuesOf(
      lines(
        'domain: edge',
        'descriptors:',
        '  - key: a',
        '    shadow_mode: yes please', // 4
        '    detailed_metric: 1', // 5
        '    descriptors: { key: b }', // 6
        '  - key: c',
        '    rate_limit: 10/s', // 8
        '  - key: d',
        '    value: [1]', // 10
        '  - plain text', // 11
      ),
    )
    assert.equal(issueAt(issues, 'descriptors[0].shadow_mode').line, 4)
    assert.match(issueAt(issues, 'descriptors[0].shadow_mode').message, /must be true or false, got "yes please"/)
    assert.equal(issueAt(issues, 'descriptors[0].detailed_metric').line, 5)
    assert.match(issueAt(issues, 'descriptors[0].descriptors').message, /expected a list of descriptors/)
    assert.equal(issueAt(issues, 'descriptors[0].descriptors').line, 6)
    assert.match(
      issueAt(issues, 'descriptors[1].rate_limit').message,
      /expected a mapping such as `\{ unit: minute, requests_per_unit: 100 \}`/,
    )
    assert.equal(issueAt(issues, 'descriptors[1].rate_limit').line, 8)
    assert.match(issueAt(issues, 'descriptors[2].value').message, /value must be a string/)
    assert.equal(issueAt(issues, 'descriptors[3]').line, 11)
  })

  it('collects every issue of every file in one pass, and the message lists them all', () => {
    const error = configErrorOf(() =>
      parseRules([
        {
          file: 'a.yaml',
          text: lines(
            'domain: a',
            'descriptors:',
            '  - key: x',
            '    rate_limit: { unit: fortnight, requests_per_unit: 1 }',
            '  - key: ""',
          ),
        },
        { file: 'b.yaml', text: lines('domain: b', 'colour: blue') },
      ]),
    )
    assert.deepEqual(
      error.issues.map((issue) => `${issue.file}:${issue.line} ${issue.path}`),
      ['a.yaml:4 descriptors[0].rate_limit.unit', 'a.yaml:5 descriptors[1].key', 'b.yaml:2 colour'],
    )
    assert.match(error.message, /^invalid rate limit rules \(3 issues\):\n/)
    for (const issue of error.issues) assert.ok(error.message.includes(formatIssue(issue)))
    assert.match(error.message, / {2}a\.yaml:4:25 descriptors\[0\]\.rate_limit\.unit: unknown unit "fortnight"/)
  })

  it('no files at all', () => {
    const error = configErrorOf(() => parseRules([]))
    assert.match(error.message, /no rules files given/)
  })
})
