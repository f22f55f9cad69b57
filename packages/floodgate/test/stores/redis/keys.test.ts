// The Redis key layout: escaping can never break out of the hash tag or collide, and every policy of a key shares one slot.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import fc from 'fast-check'
import { createPolicy, ALGORITHMS, type Policy } from '../../../src/core/policy.js'
import { escapeKeyPart, policyId, policyKey, validatePrefix, ALGORITHM_TAG } from '../../../src/stores/redis/keys.js'
import { keySlot } from '../../../src/stores/redis/slot.js'
import { FloodgateError } from '../../../src/core/errors.js'

// ioredis routes Cluster commands with this package, so it is the reference for the slot rule.
const clusterKeySlot = createRequire(import.meta.url)('cluster-key-slot') as (key: string | Buffer) => number

const policies: Policy[] = ALGORITHMS.map((algorithm, i) => createPolicy({ name: `p${i}:x{y}%`, algorithm, limit: 5, period: '1s' }))

// Any JS string: printable, full unicode, and raw UTF-16 units (lone surrogates included).
const anyText = fc.oneof(
  fc.string({ unit: fc.constantFrom('{', '}', ':', '%', '7', 'B', 'D', 'u', 'a', '\uD800', '\uDC00', '') }),
  fc.string({ unit: 'grapheme' }),
  fc.string({ unit: 'binary' }),
  fc.array(fc.integer({ min: 0, max: 0xffff })).map((units) => String.fromCharCode(...units)),
)

/** The text between the first `{` and the first `}` after it, as Redis reads a hash tag (bytes). */
function hashTag(key: string): string {
  const bytes = Buffer.from(key, 'utf8')
  const open = bytes.indexOf(0x7b)
  const close = bytes.indexOf(0x7d, open + 1)
  return bytes.subarray(open + 1, close).toString('utf8')
}

/** True when the string has no lone surrogate (it survives UTF-8 unchanged). */
function isWellFormed(text: string): boolean {
  return Buffer.from(text, 'utf8').toString('utf8') === text
}

/** Undoes escapeKeyPart: proves the escaping loses nothing. */
function unescape(text: string): string {
  if (text === '%') return ''
  return text.replace(/%u([0-9A-F]{4})|%(25|7B|7D)/g, (_, unit: string | undefined, byte: string | undefined) =>
    String.fromCharCode(parseInt(unit ?? byte!, 16)),
  )
}

test('keys read as prefix{key}:policy id:tag and keep the user key readable', () => {
  const policy = createPolicy({ name: 'burst', algorithm: 'gcra', limit: 10, period: '1s' })
  assert.equal(policyKey('fg:', 'user:42', policy), 'fg:{user:42}:rRFXxY:gcra')
  assert.equal(policyKey('app:', 'ip:2001:db8::1', policy), 'app:{ip:2001:db8::1}:rRFXxY:gcra')
  assert.equal(policyKey('', '', policy), '{%}:rRFXxY:gcra')
})

test('a policy id depends on the name alone: a reloaded policy with another limit or period keeps its key', () => {
  const before = createPolicy({ name: 'api', algorithm: 'gcra', limit: 10, period: '1s', burst: 5 })
  const after = createPolicy({ name: 'api', algorithm: 'gcra', limit: 500, period: '1m' })
  assert.equal(policyKey('fg:', 'u', after), policyKey('fg:', 'u', before))
  // An unnamed policy's default name holds its limit and period, so changing them starts afresh.
  const unnamed = createPolicy({ algorithm: 'gcra', limit: 100, period: '1h' })
  assert.equal(policyKey('fg:', 'u', unnamed), `fg:{u}:${policyId('gcra-100-per-1h')}:gcra`)
})

test('policy ids are 6 characters without braces or colons, distinct for distinct names', () => {
  fc.assert(
    fc.property(anyText, anyText, (a, b) => {
      fc.pre(a !== b)
      assert.match(policyId(a), /^[A-Za-z0-9_-]{6}$/)
      assert.notEqual(policyId(a), policyId(b))
    }),
    { numRuns: 3000 },
  )
})

test('braces and percent signs are escaped so user text cannot close the hash tag', () => {
  assert.equal(escapeKeyPart('a}b{c%d'), 'a%7Db%7Bc%25d')
  assert.equal(escapeKeyPart('%7B'), '%257B')
  assert.equal(escapeKeyPart(''), '%')
  assert.equal(escapeKeyPart('%'), '%25')
  assert.equal(escapeKeyPart('\uD800x'), '%uD800x')
  assert.equal(escapeKeyPart('😀'), '😀')
  const policy = createPolicy({ name: 'p', algorithm: 'fixed-window', limit: 1, period: '1s' })
  assert.equal(policyKey('fg:', 'x}:other:fw', policy), `fg:{x%7D:other:fw}:${policyId('p')}:fw`)
})

test('every algorithm has its own tag without a colon', () => {
  const tags = ALGORITHMS.map((name) => ALGORITHM_TAG[name])
  assert.equal(new Set(tags).size, ALGORITHMS.length)
  for (const tag of tags) assert.match(tag, /^[a-z]+$/)
})

test('a leaky bucket keeps policing and shaping state under different keys', () => {
  const policing = createPolicy({ name: 'queue', algorithm: 'leaky-bucket', limit: 5, period: '1s' })
  const shaping = createPolicy({ name: 'queue', algorithm: 'leaky-bucket', limit: 5, period: '1s', shaping: true })
  assert.equal(policyKey('fg:', 'u', policing), 'fg:{u}:EDg0Xs:lb')
  assert.equal(policyKey('fg:', 'u', shaping), 'fg:{u}:EDg0Xs:lbs')
})

test('escaping round-trips and its output is well-formed text without braces', () => {
  fc.assert(
    fc.property(anyText, (text) => {
      const escaped = escapeKeyPart(text)
      assert.equal(unescape(escaped), text)
      assert.ok(escaped.length > 0)
      assert.ok(!/[{}]/.test(escaped))
      assert.ok(isWellFormed(escaped), 'no lone surrogates survive')
    }),
    { numRuns: 2000 },
  )
})

// Short strings over the characters that matter, so a broken escape shows up quickly.
const trickyText = fc.string({ unit: fc.constantFrom('{', '}', ':', '%', '7', 'D', 'u', 'a', '\uD800', '\uD801', '\uDC00'), maxLength: 6 })

/** Reads (user key, policy id, tag) back from the bytes Redis stores: a left inverse of policyKey. */
function parseKey(prefix: string, bytes: Buffer): [string, string, string] {
  const key = bytes.toString('utf8')
  assert.ok(key.startsWith(`${prefix}{`))
  const close = key.indexOf('}', prefix.length + 1)
  const [empty, id, tag, ...rest] = key.slice(close + 1).split(':')
  assert.equal(empty, '')
  assert.equal(rest.length, 0)
  return [unescape(key.slice(prefix.length + 1, close)), id, tag]
}

test('the bytes of a Redis key give back exactly its user key, policy id and tag, so distinct user keys never collide', () => {
  const text = fc.oneof(trickyText, anyText)
  fc.assert(
    fc.property(
      text,
      text.filter((name) => name.length > 0),
      fc.constantFrom(...ALGORITHMS),
      fc.constantFrom('fg:', '', 'a:b:'),
      (userKey, name, algorithm, prefix) => {
        const policy = createPolicy({ name, algorithm, limit: 1, period: '1s' })
        const bytes = Buffer.from(policyKey(prefix, userKey, policy), 'utf8')
        assert.deepEqual(parseKey(prefix, bytes), [userKey, policyId(name), ALGORITHM_TAG[algorithm]])
      },
    ),
    { numRuns: 3000 },
  )
})

test('the first {…} of every policy key is exactly the escaped user key, so all policies share its slot', () => {
  fc.assert(
    fc.property(anyText, fc.constantFrom('fg:', '', 'my:app:'), (userKey, prefix) => {
      const escaped = escapeKeyPart(userKey)
      const slots = new Set<number>()
      for (const policy of policies) {
        const key = policyKey(prefix, userKey, policy)
        assert.equal(hashTag(key), escaped)
        const slot = keySlot(key)
        assert.equal(slot, clusterKeySlot(key), 'ioredis routes the string to the same slot')
        assert.equal(slot, clusterKeySlot(Buffer.from(key, 'utf8')), 'the bytes on the wire hash to the same slot')
        slots.add(slot)
      }
      assert.equal(slots.size, 1)
    }),
    { numRuns: 1000 },
  )
})

test('keySlot follows the Redis rule: known slots, hash tags, empty tags hash the whole key', () => {
  assert.equal(keySlot('123456789'), 12739) // CRC16/XMODEM check value 0x31C3 mod 16384
  assert.equal(keySlot('foo'), 12182)
  assert.equal(keySlot('{user1000}.following'), keySlot('user1000'))
  // Answers of CLUSTER KEYSLOT on redis-server 7.0.15, edge cases included.
  const fromRedis: [string, number][] = [
    ['foo{}{bar}', 8363],
    ['{}x', 10595],
    ['x{}', 2608],
    ['a{b}c', 3300],
    ['{user1000}.following', 3443],
  ]
  for (const [key, slot] of fromRedis) assert.equal(keySlot(key), slot, key)
  fc.assert(
    fc.property(fc.string({ unit: 'binary' }), (key) => {
      fc.pre(isWellFormed(key) && !key.includes('{}'))
      assert.equal(keySlot(key), clusterKeySlot(key))
    }),
    { numRuns: 1000 },
  )
})

test('a prefix with braces is refused with a message saying why', () => {
  assert.equal(validatePrefix('fg:'), 'fg:')
  for (const bad of ['{fg}', 'a}', 42]) {
    assert.throws(
      () => validatePrefix(bad),
      (error: unknown) => error instanceof FloodgateError && error.code === 'INVALID_OPTION' && /brace|'\{'/.test(error.message),
    )
  }
})
