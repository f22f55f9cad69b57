// boundedKey: short keys kept as they are, long ones hashed; the two forms can never collide.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { boundedKey, HASHED_KEY_PREFIX, MAX_PLAIN_KEY_LENGTH } from '../../src/core/bounded-key.js'
import { storeKeyOf } from '../../src/rules/rule-set.js'

describe('boundedKey', () => {
  it('keeps keys up to the bound and hashes longer ones to 39 characters', () => {
    const plain = 'u'.repeat(MAX_PLAIN_KEY_LENGTH)
    assert.equal(boundedKey(plain), plain)
    const hashed = boundedKey(`${plain}u`)
    assert.match(hashed, /^sha256:[0-9a-f]{32}$/)
    assert.equal(boundedKey('x'.repeat(60_000)).length, 39)
    assert.equal(boundedKey('abc', 2), boundedKey('abc'.padEnd(3, '?'), 2))
  })

  it('is stable and tells different texts apart', () => {
    const a = 'a'.repeat(1_000)
    assert.equal(boundedKey(a), boundedKey('a'.repeat(1_000)))
    assert.notEqual(boundedKey(a), boundedKey(`${a}b`))
  })

  it('hashes a short text that looks like a hashed key, so nobody can pick another key', () => {
    const long = boundedKey('v'.repeat(500))
    assert.notEqual(boundedKey(long), long)
    assert.ok(boundedKey(`${HASHED_KEY_PREFIX}x`).startsWith(HASHED_KEY_PREFIX))
    assert.notEqual(boundedKey(`${HASHED_KEY_PREFIX}x`), `${HASHED_KEY_PREFIX}x`)
  })

  it('bounds the rules store keys (the service and the middleware build theirs with storeKeyOf)', () => {
    assert.equal(storeKeyOf('edge', [{ key: 'user', value: 'alice' }]), 'edge|user=alice')
    const key = storeKeyOf('edge', [{ key: 'user', value: 'x'.repeat(60_000) }])
    assert.match(key, /^sha256:[0-9a-f]{32}$/)
    assert.notEqual(key, storeKeyOf('edge', [{ key: 'user', value: 'x'.repeat(60_001) }]))
  })
})
