// mergeDomains (envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG): one domain's descriptors spread over files.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadRules } from '../../src/rules.js'
import { configErrorOf, d, issueAt } from './support.js'

const USERS = `domain: shared
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 5 }
`
const PATHS = `domain: shared
descriptors:
  - key: path
    value: /login
    rate_limit: { unit: minute, requests_per_unit: 2 }
`
const USERS_AGAIN = `domain: shared
descriptors:
  - key: path
    value: /signup
    rate_limit: { unit: hour, requests_per_unit: 9 }
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 7 }
`

describe('loadRules with mergeDomains', () => {
  let tmp: string
  before(() => {
    tmp = mkdtempSync(join(tmpdir(), 'floodgate-rules-merge-'))
  })
  after(() => rmSync(tmp, { recursive: true, force: true }))

  function dir(name: string, files: Record<string, string>): string {
    const path = join(tmp, name)
    mkdirSync(path)
    for (const [file, text] of Object.entries(files)) writeFileSync(join(path, file), text)
    return path
  }

  it('merges the descriptors of one domain defined in two files', () => {
    const path = dir('merged', { 'a.yaml': USERS, 'b.yaml': PATHS })
    const set = loadRules(path, { mergeDomains: true })
    assert.deepEqual([...set.domains], ['shared'])
    assert.equal(set.match('shared', [d('user=alice')])[0]?.policies[0].limit, 5)
    assert.equal(set.match('shared', [d('path=/login')])[0]?.policies[0].limit, 2)
  })

  it('without it, two files of one domain are still refused', () => {
    const path = dir('unmerged', { 'a.yaml': USERS, 'b.yaml': PATHS })
    assert.match(issueAt(configErrorOf(() => loadRules(path)).issues, 'domain').message, /duplicate domain "shared"/)
  })

  it('refuses a top-level descriptor defined in two files, with file:line of both', () => {
    const path = dir('conflict', { 'a.yaml': USERS, 'b.yaml': USERS_AGAIN })
    const issue = issueAt(configErrorOf(() => loadRules(path, { mergeDomains: true })).issues, 'descriptors')
    assert.equal(issue.file, join(path, 'b.yaml'))
    assert.equal(issue.line, 6)
    assert.match(issue.message, /duplicate descriptor user of domain "shared": already defined in .*a\.yaml:3/)
  })
})
