// Every config error names the file, the line, the path in the tree and what to change: a rule's fields
// and options (share_threshold, metadata, replaces, limits, sync, types), and several issues at once.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { formatIssue, parseRules } from '../../src/rules.js'
import { configErrorOf, issueAt, issuesOf } from './support.js'

/** Joins lines so that element i is line i + 1, which keeps expected line numbers obvious. */
const lines = (...text: string[]): string => `${text.join('\n')}\n`

describe('config errors: fields and options', () => {
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
