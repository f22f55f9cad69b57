// The Redis key layout: one string per (user key, policy), every policy of a user key in one Cluster slot.
//
//   <prefix>{<escaped user key>}:<policy id>:<algorithm tag>      e.g.  fg:{ip:203.0.113.7}:Lb3Xk9:gcra
//
// The policy id is the first 6 base64url characters of SHA-1(policy name), see policyId: short, as Redis keeps
// the key's text once per active user key and policy, and stable, because it depends on the name
// alone, so a policy reloaded with a new limit or period keeps its counter (an unnamed policy's
// default name, e.g. `gcra-100-per-1h`, holds its limit, so changing that limit starts afresh).
// `policyKey` gives the key of any (user key, policy) when debugging; docs/redis.md has the rest.

import { createHash } from 'node:crypto'
import type { AlgorithmName, Policy } from '../../core/policy.js'
import { FloodgateError } from '../../core/errors.js'

/**
 * Short per-algorithm suffixes. The algorithm is part of the key so that switching a policy's
 * algorithm under the same name starts from fresh state instead of misreading the old one; short,
 * because Redis keeps the key name once per active user key.
 */
export const ALGORITHM_TAG: Readonly<Record<AlgorithmName, string>> = Object.freeze({
  'fixed-window': 'fw',
  'sliding-window': 'sw',
  'sliding-log': 'sl',
  'token-bucket': 'tb',
  'leaky-bucket': 'lb',
  gcra: 'gcra',
  concurrency: 'conc',
})

// Characters that could end a hash tag early or fake an escape, and lone UTF-16 surrogates (which
// would all become the same U+FFFD bytes on the wire, so two distinct keys could collide).
const NEEDS_ESCAPE = /[%{}\uD800-\uDFFF]/

/**
 * Escapes text for use inside a key so it can neither close the `{…}` hash tag nor collide with
 * other text: `%`, `{` and `}` become `%25`, `%7B`, `%7D`; a lone surrogate becomes `%uXXXX`
 * (valid surrogate pairs pass through). The empty string becomes `%`, because Redis hashes the
 * whole key when a hash tag is empty, which would scatter one user key's policies across slots.
 */
export function escapeKeyPart(text: string): string {
  if (text.length === 0) return '%'
  if (!NEEDS_ESCAPE.test(text)) return text
  let out = ''
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i)
    if (unit === 0x25) out += '%25'
    else if (unit === 0x7b) out += '%7B'
    else if (unit === 0x7d) out += '%7D'
    else if (unit >= 0xd800 && unit <= 0xdbff && isLowSurrogate(text.charCodeAt(i + 1))) {
      out += text[i] + text[i + 1]
      i++
    } else if (unit >= 0xd800 && unit <= 0xdfff) out += `%u${unit.toString(16).toUpperCase().padStart(4, '0')}`
    else out += text[i]
  }
  return out
}

function isLowSurrogate(unit: number): boolean {
  return unit >= 0xdc00 && unit <= 0xdfff
}

/**
 * The Redis key of one policy of one user key:
 * `prefix + '{' + escape(userKey) + '}' + ':' + policyId(policy) + ':' + tag`.
 * The braces are a Redis Cluster hash tag, so every policy of a user key lands in the same slot
 * and one script call can decide them together.
 */
export function policyKey(prefix: string, userKey: string, policy: Policy): string {
  let suffix = suffixes.get(policy)
  if (suffix === undefined) {
    suffix = `}:${policyId(policy.name)}:${stateTag(policy)}`
    suffixes.set(policy, suffix)
  }
  return `${prefix}{${escapeKeyPart(userKey)}${suffix}`
}

// What follows the user key, per policy: made once, as policies are immutable and long-lived.
const suffixes = new WeakMap<Policy, string>()

/**
 * The policy's part of its keys: 36 bits of SHA-1 of its escaped name (escaping keeps distinct names
 * distinct in UTF-8), as 6 base64url characters (no brace, no colon). Two policies of one user key
 * share a key only if their names collide, a chance of about n² / 2^37 for n policies (1 in 340
 * million for 20).
 */
export function policyId(name: string): string {
  return createHash('sha1').update(escapeKeyPart(name), 'utf8').digest('base64url').slice(0, 6)
}

/**
 * The algorithm's tag, and for leaky-bucket whether it shapes: policing and shaping keep states of
 * different shapes, so a policy switched between them under one name must not read the other's.
 */
function stateTag(policy: Policy): string {
  return policy.shaping ? `${ALGORITHM_TAG[policy.algorithm]}s` : ALGORITHM_TAG[policy.algorithm]
}

/** Checks a key prefix: any text without braces (a brace would move the hash tag into the prefix). */
export function validatePrefix(prefix: unknown): string {
  if (typeof prefix !== 'string' || /[{}]/.test(prefix)) {
    throw new FloodgateError(
      'INVALID_OPTION',
      `RedisStore prefix: must be a string without '{' or '}' (it comes before the hash tag), got ${JSON.stringify(prefix)}`,
    )
  }
  return prefix
}
