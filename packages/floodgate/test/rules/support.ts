// Helpers for the rules tests: parse YAML text and capture the ConfigError it must raise.

import assert from 'node:assert/strict'
import { ConfigError, parseRules, type ConfigIssue, type DescriptorEntry } from '../../src/rules.js'

/** Parses `text` as one file and returns the issues of the ConfigError it must throw. */
export function issuesOf(text: string, file = 'rules.yaml'): ConfigIssue[] {
  return configErrorOf(() => parseRules([{ file, text }])).issues
}

/** Runs `load`, demands a ConfigError with code INVALID_CONFIG, and returns it. */
export function configErrorOf(load: () => unknown): ConfigError {
  try {
    load()
  } catch (error) {
    assert.ok(error instanceof ConfigError, `expected a ConfigError, got ${String(error)}`)
    assert.equal(error.code, 'INVALID_CONFIG')
    assert.ok(error.issues.length > 0)
    return error
  }
  assert.fail('expected a ConfigError, but the rules loaded')
}

/** The one issue at `path`, failing with the full list when there is not exactly one. */
export function issueAt(issues: readonly ConfigIssue[], path: string): ConfigIssue {
  const found = issues.filter((issue) => issue.path === path)
  assert.equal(found.length, 1, `expected one issue at ${path}, got ${JSON.stringify(issues, null, 2)}`)
  return found[0]
}

/** Descriptor entries from `key=value` strings, e.g. d('plan=free', 'user=ann'). */
export function d(...pairs: string[]): DescriptorEntry[] {
  return pairs.map((pair) => {
    const at = pair.indexOf('=')
    return { key: pair.slice(0, at), value: pair.slice(at + 1) }
  })
}
