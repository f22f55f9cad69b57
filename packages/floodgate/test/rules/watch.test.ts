// Hot reload on real files: a valid change swaps the snapshot, an invalid one keeps the old serving.

import { describe, it, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, renameSync, rmSync, unlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ConfigError, RuleWatcher, type RuleSet } from '../../src/rules.js'
import { configErrorOf, d } from './support.js'

const rulesText = (domain: string, perSecond: number | string): string =>
  `domain: ${domain}\ndescriptors:\n  - key: ip\n    rate_limit:\n      unit: second\n      requests_per_unit: ${perSecond}\n`

/** Resolves with the watcher's next `event`; fails instead of hanging if none comes. */
function next<T extends RuleSet | ConfigError>(watcher: RuleWatcher, event: 'reload' | 'error'): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      watcher.off(event as 'reload', done)
      reject(new Error(`no '${event}' event within 10s`))
    }, 10_000)
    function done(value: RuleSet | ConfigError): void {
      clearTimeout(timer)
      resolve(value as T)
    }
    watcher.once(event as 'reload', done)
  })
}

const limitOf = (set: RuleSet, domain = 'a'): number | undefined => set.match(domain, [d('ip=1.1.1.1')])[0]?.policies[0].limit

describe('RuleWatcher', () => {
  let tmp: string
  const watchers: RuleWatcher[] = []
  const open = (path: string): RuleWatcher => {
    const watcher = new RuleWatcher(path, { debounceMs: 20 })
    watchers.push(watcher)
    return watcher
  }
  before(() => {
    tmp = mkdtempSync(join(tmpdir(), 'floodgate-rules-watch-'))
  })
  after(async () => {
    for (const watcher of watchers) await watcher.close()
    rmSync(tmp, { recursive: true, force: true })
  })

  it('swaps in a valid change; keeps serving the old snapshot and reports file and line on an invalid one', async () => {
    const file = join(tmp, 'rules.yaml')
    writeFileSync(file, rulesText('a', 10))
    const watcher = open(file)
    const first = watcher.current
    assert.equal(limitOf(first), 10)

    let reloaded = next<RuleSet>(watcher, 'reload')
    writeFileSync(file, rulesText('a', 20))
    const second = await reloaded
    assert.equal(watcher.current, second)
    assert.equal(limitOf(second), 20)
    assert.equal(limitOf(first), 10) // a snapshot never changes under a request holding it

    const failed = next<ConfigError>(watcher, 'error')
    writeFileSync(file, rulesText('a', '"many"'))
    const error = await failed
    assert.ok(error instanceof ConfigError)
    assert.equal(error.issues[0].file, file)
    assert.equal(error.issues[0].line, 6)
    assert.equal(error.issues[0].path, 'descriptors[0].rate_limit.requests_per_unit')
    assert.equal(watcher.current, second)
    assert.equal(watcher.lastError, error)

    reloaded = next<RuleSet>(watcher, 'reload')
    writeFileSync(file, rulesText('a', 30))
    assert.equal(limitOf(await reloaded), 30)
    assert.equal(watcher.lastError, undefined)
  })

  it('follows editors that write a new file and rename it over the old one', async () => {
    const file = join(tmp, 'renamed.yaml')
    writeFileSync(file, rulesText('a', 1))
    const watcher = open(file)
    const reloaded = next<RuleSet>(watcher, 'reload')
    writeFileSync(join(tmp, 'renamed.yaml.tmp'), rulesText('a', 2))
    renameSync(join(tmp, 'renamed.yaml.tmp'), file)
    assert.equal(limitOf(await reloaded), 2)
    // And again, on the new inode.
    const again = next<RuleSet>(watcher, 'reload')
    writeFileSync(file, rulesText('a', 3))
    assert.equal(limitOf(await again), 3)
  })

  it('a deleted file is an error, and the same rules written back load again', async () => {
    const file = join(tmp, 'deleted.yaml')
    writeFileSync(file, rulesText('a', 5))
    const watcher = open(file)
    const failed = next<ConfigError>(watcher, 'error')
    unlinkSync(file)
    assert.match((await failed).message, /cannot read rules: no such file/)
    assert.equal(limitOf(watcher.current), 5)
    const reloaded = next<RuleSet>(watcher, 'reload')
    writeFileSync(file, rulesText('a', 5))
    assert.equal(limitOf(await reloaded), 5)
    assert.equal(watcher.lastError, undefined)
  })

  it('watches a directory as one snapshot: new files join, a duplicate domain is rejected whole', async () => {
    const dir = join(tmp, 'rules.d')
    mkdirSync(dir)
    writeFileSync(join(dir, 'a.yaml'), rulesText('a', 1))
    const watcher = open(dir)
    let reloaded = next<RuleSet>(watcher, 'reload')
    writeFileSync(join(dir, 'b.yaml'), rulesText('b', 2))
    let set = await reloaded
    assert.deepEqual([...set.domains], ['a', 'b'])
    assert.equal(limitOf(set, 'b'), 2)

    const failed = next<ConfigError>(watcher, 'error')
    writeFileSync(join(dir, 'c.yaml'), rulesText('b', 3))
    const error = await failed
    assert.equal(error.issues[0].file, join(dir, 'c.yaml'))
    assert.equal(error.issues[0].line, 1)
    assert.match(error.issues[0].message, /duplicate domain "b"/)
    assert.equal(watcher.current, set)

    reloaded = next<RuleSet>(watcher, 'reload')
    unlinkSync(join(dir, 'c.yaml'))
    set = await reloaded
    assert.deepEqual([...set.domains], ['a', 'b'])
  })

  it('never throws without an error listener: reload() reports false and keeps lastError', () => {
    const file = join(tmp, 'quiet.yaml')
    writeFileSync(file, rulesText('a', 1))
    const watcher = open(file)
    const before = watcher.current
    writeFileSync(file, 'domain: a\ndescriptors:\n  - nonsense: 1\n')
    assert.equal(watcher.reload(), false)
    assert.ok(watcher.lastError instanceof ConfigError)
    assert.equal(watcher.lastError.issues[0].line, 3)
    assert.equal(watcher.current, before)
    writeFileSync(file, rulesText('a', 7))
    assert.equal(watcher.reload(), true)
    assert.equal(limitOf(watcher.current), 7)
  })

  it('refuses to start on invalid rules', () => {
    const file = join(tmp, 'invalid-at-start.yaml')
    writeFileSync(file, 'domain: ""\n')
    const error = configErrorOf(() => open(file))
    assert.equal(error.issues[0].file, file)
    assert.equal(error.issues[0].line, 1)
  })
})
