// `yaml` is an optional peer of the library: loaded at the first rules file, and named when missing.
// (The consumer test proves the same on a real install without it: test/consumer/consumer.test.ts.)

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { FloodgateError } from '../../src/index.js'
import { loadYaml } from '../../src/rules/yaml-source.js'

/** A loader that fails the way Node's require does for a package that is not installed. */
function notInstalled(name: string): never {
  throw Object.assign(new Error(`Cannot find module '${name}'\nRequire stack:\n- /app/x.js`), { code: 'MODULE_NOT_FOUND' })
}

describe('the yaml peer', () => {
  it('is loaded from the app when present', () => {
    const yaml = loadYaml()
    assert.equal(yaml.parse('a: 1').a, 1)
    assert.equal(yaml, createRequire(import.meta.url)('yaml'))
  })

  it('when missing, says to install it rather than failing with a bare module error', () => {
    assert.throws(
      () => loadYaml(notInstalled),
      (error: unknown) => error instanceof FloodgateError && error.code === 'INVALID_OPTION' && /npm i yaml/.test(error.message),
    )
  })

  it('passes other failures through unchanged (a broken yaml install is not "missing")', () => {
    const broken = new Error('boom')
    assert.throws(
      () =>
        loadYaml(() => {
          throw broken
        }),
      (error) => error === broken,
    )
  })
})
