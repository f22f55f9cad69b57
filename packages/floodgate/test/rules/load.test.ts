// Loading from disk: one file, a directory as one snapshot, duplicate domains, unreadable paths.

import { describe, it, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadRules, readRuleSources } from '../../src/rules.js'
import { configErrorOf, d, issueAt } from './support.js'

const FIXTURES = join(import.meta.dirname, 'fixtures')

describe('loadRules', () => {
  let tmp: string
  before(() => {
    tmp = mkdtempSync(join(tmpdir(), 'floodgate-rules-load-'))
  })
  after(() => rmSync(tmp, { recursive: true, force: true }))

  it('loads every *.yaml and *.yml of a directory, sorted, skipping dotfiles and other files', () => {
    const set = loadRules(join(FIXTURES, 'rules.d'))
    assert.deepEqual(set.files, [join(FIXTURES, 'rules.d', '10-edge.yaml'), join(FIXTURES, 'rules.d', '20-internal.yml')])
    assert.deepEqual([...set.domains], ['edge', 'internal'])
    assert.equal(set.match('internal', [d('service=billing')])[0]?.policies[0].limit, 100)
  })

  it('rejects the whole directory when two files define one domain, naming both', () => {
    const error = configErrorOf(() => loadRules(join(FIXTURES, 'dup-domain')))
    const issue = issueAt(error.issues, 'domain')
    assert.equal(issue.file, join(FIXTURES, 'dup-domain', 'b.yaml'))
    assert.equal(issue.line, 2)
    assert.match(issue.message, /duplicate domain "shared": already defined in .*a\.yaml:1; keep each domain in one file/)
  })

  it('rejects the whole set when any one file has an issue', () => {
    const dir = join(tmp, 'one-bad')
    mkdirSync(dir)
    writeFileSync(join(dir, 'a.yaml'), 'domain: a\ndescriptors:\n  - key: x\n    rate_limit: { unit: second, requests_per_unit: 1 }\n')
    writeFileSync(join(dir, 'b.yaml'), 'domain: b\ndescriptors:\n  - key: x\n    rate_limit: { unit: sec, requests_per_unit: 1 }\n')
    const error = configErrorOf(() => loadRules(dir))
    assert.equal(error.issues.length, 1)
    assert.equal(error.issues[0].file, join(dir, 'b.yaml'))
    assert.equal(error.issues[0].line, 4)
  })

  it('follows symlinked files, as in a Kubernetes ConfigMap mount, and ignores its ..data folder', () => {
    const dir = join(tmp, 'configmap')
    mkdirSync(join(dir, '..2026_01_01'), { recursive: true })
    writeFileSync(join(dir, '..2026_01_01', 'rules.yaml'), 'domain: k8s\ndescriptors: []\n')
    symlinkSync('..2026_01_01', join(dir, '..data'))
    symlinkSync(join('..data', 'rules.yaml'), join(dir, 'rules.yaml'))
    assert.deepEqual([...loadRules(dir).domains], ['k8s'])
  })

  it('a missing path, and a directory without rules files, are ConfigErrors that say what to do', () => {
    const missing = configErrorOf(() => loadRules(join(tmp, 'nope.yaml')))
    assert.equal(missing.issues[0].file, join(tmp, 'nope.yaml'))
    assert.match(missing.issues[0].message, /cannot read rules: no such file or directory; check the path/)
    const empty = join(tmp, 'empty')
    mkdirSync(empty)
    assert.match(configErrorOf(() => loadRules(empty)).message, /holds no \*\.yaml or \*\.yml files/)
  })

  it('readRuleSources returns the texts without validating them', () => {
    const sources = readRuleSources(join(FIXTURES, 'dup-domain'))
    assert.deepEqual(
      sources.map((source) => source.file),
      [join(FIXTURES, 'dup-domain', 'a.yaml'), join(FIXTURES, 'dup-domain', 'b.yaml')],
    )
    assert.match(sources[1].text, /^# The same domain again/)
  })
})
