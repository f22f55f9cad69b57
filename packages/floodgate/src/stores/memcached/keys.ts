// The memcached key layout: printable ASCII of at most 250 bytes, long or unusual user keys hashed, every policy of a key apart,
// and every record of one user key on the same server (the part before the first `|` places it).

import { createHash } from 'node:crypto'
import { FloodgateError } from '../../core/errors.js'
import type { Policy } from '../../core/policy.js'
import { ALGORITHM_TAG } from '../redis/keys.js'

/** Memcached's longest key, in bytes. */
export const MAX_MEMCACHED_KEY_BYTES = 250

/** Room kept after a policy key for a window start (`:` and up to 15 digits). */
const WINDOW_SUFFIX_BYTES = 16

/** Longest route (prefix and escaped user key) kept as text: room remains for `|#` and a SHA-256 in hex. */
const MAX_PLAIN_ROUTE = MAX_MEMCACHED_KEY_BYTES - WINDOW_SUFFIX_BYTES - 2 - 64

// Kept as they are: printable ASCII but the characters the layout itself uses.
const PLAIN = /^[\x21-\x22\x24\x26-\x7b\x7d\x7e]*$/

/**
 * Escapes text into printable ASCII with no `%`, `#` or `|`: those become `%25`, `%23`, `%7C`, any
 * other character outside `!`…`~` its UTF-8 bytes as `%XX`, a lone UTF-16 surrogate `%uXXXX` (so two
 * different strings never escape alike). Memcached keys may hold no spaces or control characters.
 */
export function escapeMemcachedPart(text: string): string {
  if (PLAIN.test(text)) return text
  let out = ''
  for (const char of text) {
    const unit = char.charCodeAt(0)
    if (char.length === 1 && unit >= 0x21 && unit <= 0x7e && unit !== 0x25 && unit !== 0x23 && unit !== 0x7c) out += char
    else if (char.length === 1 && unit >= 0xd800 && unit <= 0xdfff) out += `%u${unit.toString(16).toUpperCase().padStart(4, '0')}`
    else for (const byte of Buffer.from(char)) out += `%${byte.toString(16).toUpperCase().padStart(2, '0')}`
  }
  return out
}

/**
 * The route of a user key: `prefix + escape(userKey)`, or `prefix + '#' + ` the first 32 hex
 * digits of SHA-256 of the escaped key when that is longer than MAX_PLAIN_ROUTE (escaped text never
 * holds `#`, so the two forms never meet). Every record of the user key starts with it and a `|`,
 * and the store's ring places a record by its route alone: all of a key's records (each policy,
 * each window's counter) live on one server, so one dead server fails a key whole or not at all.
 */
export function memcachedRoute(prefix: string, userKey: string): string {
  const escaped = escapeMemcachedPart(userKey)
  if (prefix.length + escaped.length <= MAX_PLAIN_ROUTE) return prefix + escaped
  return `${prefix}#${createHash('sha256').update(escaped).digest('hex').slice(0, 32)}`
}

/** The route of a record key (see memcachedRoute): what comes before its first `|` (all of it, without one). */
export function routeOfRecord(recordKey: string): string {
  const bar = recordKey.indexOf('|')
  return bar < 0 ? recordKey : recordKey.slice(0, bar)
}

/**
 * The key of one policy of one user key: `route + '|' + escape(policy name) + '|' + tag`, or, when
 * that would leave no room for a window start within 250 bytes, `route + '|#' + SHA-256` of the part
 * after the route's `|`. Counters append `:<window start>`.
 */
export function memcachedPolicyKey(prefix: string, userKey: string, policy: Policy): string {
  const tag = policy.shaping ? `${ALGORITHM_TAG[policy.algorithm]}s` : ALGORITHM_TAG[policy.algorithm]
  const route = memcachedRoute(prefix, userKey)
  const rest = `${escapeMemcachedPart(policy.name)}|${tag}`
  if (route.length + 1 + rest.length + WINDOW_SUFFIX_BYTES <= MAX_MEMCACHED_KEY_BYTES) return `${route}|${rest}`
  return `${route}|#${createHash('sha256').update(rest).digest('hex')}`
}

/** Checks a prefix: printable ASCII without `#` or `|`, short enough to leave room for a hashed key. */
export function validateMemcachedPrefix(prefix: unknown): string {
  if (typeof prefix !== 'string' || !/^[\x21-\x7e]*$/.test(prefix) || /[#|]/.test(prefix) || prefix.length > 100) {
    throw new FloodgateError(
      'INVALID_OPTION',
      `MemcachedStore prefix: must be at most 100 printable ASCII characters without spaces, '#' or '|', got ${JSON.stringify(prefix)}`,
    )
  }
  return prefix
}
