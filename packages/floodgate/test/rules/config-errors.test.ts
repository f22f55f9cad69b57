// Every config error names the file, the line, the path in the tree and what to change: YAML, structure,
// keys and units here; a rule's fields and options in config-errors-fields.test.ts.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { parseRules } from '../../src/rules.js'
import { issueAt, issuesOf } from './support.js'

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
})
