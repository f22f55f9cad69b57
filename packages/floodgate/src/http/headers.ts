// Rate-limit response headers, one function per generation: legacy X-RateLimit-*, IETF draft-6, -7, and -8 (structured).

import type { AlgorithmName } from '../core/policy.js'
import type { Decision } from '../limiter/types.js'

/** A header generation; `draft-6`, `draft-7` and `draft-8` share field names, so at most one of them at a time. */
export type HeaderStyle = 'legacy' | 'draft-6' | 'draft-7' | 'draft-8'

export const HEADER_STYLES: readonly HeaderStyle[] = ['legacy', 'draft-6', 'draft-7', 'draft-8']

/**
 * The default: `legacy` because most clients in the wild read `X-RateLimit-*`, plus the current
 * structured IETF fields (`draft-8`, unchanged through draft-10) for clients that follow the draft.
 */
export const DEFAULT_HEADER_STYLES: readonly HeaderStyle[] = ['legacy', 'draft-8']

/** Header name/value pairs in the order to set them. */
export type HeaderList = [name: string, value: string][]

/** The numbers one policy contributes to headers. */
interface QuotaView {
  name: string
  /** Absent when the decision lists no policies (fail-open). */
  algorithm?: AlgorithmName
  limit: number
  periodMs: number
  allowed: boolean
  remaining: number
  resetMs: number
  retryAfterMs: number
  /** The request's cost can never pass this policy (Decision.never): no wait to announce. */
  never?: boolean
}

/** The deciding policy's view; falls back to the decision's own numbers when it lists no policies (fail-open). */
function decidingView(decision: Decision): QuotaView {
  const part = decision.policies.find((p) => p.name === decision.policy)
  return {
    name: decision.policy,
    limit: decision.limit,
    periodMs: part?.periodMs ?? 0,
    allowed: decision.allowed,
    remaining: decision.remaining,
    resetMs: decision.resetMs,
    retryAfterMs: decision.retryAfterMs,
    never: decision.never,
  }
}

function policyViews(decision: Decision): QuotaView[] {
  return decision.policies.length > 0 ? decision.policies : [decidingView(decision)]
}

/**
 * Whole seconds until the policy has quota again: for an exhausted policy the wait for this
 * request (so `Retry-After` is never earlier), otherwise until it is fully restored. Ceiled so a
 * client that waits exactly this long is never too early. A request that can never pass (`never`)
 * has no wait: the fields then say when the quota is fully restored, which is true of the quota.
 */
export function secondsUntilQuota(view: Pick<QuotaView, 'allowed' | 'resetMs' | 'retryAfterMs' | 'never'>): number {
  return Math.ceil((view.allowed || view.never === true ? view.resetMs : Math.max(view.retryAfterMs, 0)) / 1000)
}

/** The window in whole seconds (at least 1: the drafts have no sub-second windows). */
function windowSeconds(view: QuotaView): number {
  return Math.max(1, Math.ceil(view.periodMs / 1000))
}

/** `X-RateLimit-Limit/Remaining/Reset` (Reset in Unix epoch seconds), as GitHub and Twitter send them. */
export function legacyHeaders(decision: Decision, nowMs: number): HeaderList {
  const headers: HeaderList = []
  addLegacyHeaders(headers, decision, nowMs)
  return headers
}

// The deciding policy's numbers are the decision's own: no view to build.
function addLegacyHeaders(headers: HeaderList, decision: Decision, nowMs: number): void {
  headers.push(
    ['X-RateLimit-Limit', String(decision.limit)],
    ['X-RateLimit-Remaining', String(decision.remaining)],
    ['X-RateLimit-Reset', String(Math.ceil(nowMs / 1000) + secondsUntilQuota(decision))],
  )
}

/** Draft-6: every policy in `RateLimit-Policy` (`100;w=60, 1000;w=86400`), the deciding one in separate fields. */
export function draft6Headers(decision: Decision): HeaderList {
  const view = decidingView(decision)
  return [
    [
      'RateLimit-Policy',
      policyViews(decision)
        .map((p) => `${p.limit};w=${windowSeconds(p)}`)
        .join(', '),
    ],
    ['RateLimit-Limit', String(view.limit)],
    ['RateLimit-Remaining', String(view.remaining)],
    ['RateLimit-Reset', String(secondsUntilQuota(view))],
  ]
}

/** Draft-7: `RateLimit-Policy` plus one combined `RateLimit: limit=…, remaining=…, reset=…` for the deciding policy. */
export function draft7Headers(decision: Decision): HeaderList {
  const view = decidingView(decision)
  return [
    [
      'RateLimit-Policy',
      policyViews(decision)
        .map((p) => `${p.limit};w=${windowSeconds(p)}`)
        .join(', '),
    ],
    ['RateLimit', `limit=${view.limit}, remaining=${view.remaining}, reset=${secondsUntilQuota(view)}`],
  ]
}

/** Draft-8's quota unit: `requests` is the default and left out; a concurrency policy counts requests in flight. */
function quotaUnitParameter(view: QuotaView): string {
  return view.algorithm === 'concurrency' ? ';qu="concurrent-requests"' : ''
}

/**
 * Draft-8 onward (RFC 8941 lists): one member per policy, named by a String —
 * `RateLimit-Policy: "burst";q=100;w=60, "daily";q=1000;w=86400` and `RateLimit: "burst";r=50;t=30, …`;
 * a concurrency policy adds `qu="concurrent-requests"`.
 */
export function draft8Headers(decision: Decision): HeaderList {
  const headers: HeaderList = []
  addDraft8Headers(headers, decision)
  return headers
}

// Lists written by a loop, not map and join: these run on every answer of a busy service.
function addDraft8Headers(headers: HeaderList, decision: Decision): void {
  const views = policyViews(decision)
  let policy = policyMember(views[0])
  let quota = `${sfString(views[0].name)};r=${views[0].remaining};t=${secondsUntilQuota(views[0])}`
  for (let i = 1; i < views.length; i++) {
    const view = views[i]
    policy += `, ${policyMember(view)}`
    quota += `, ${sfString(view.name)};r=${view.remaining};t=${secondsUntilQuota(view)}`
  }
  headers.push(['RateLimit-Policy', policy], ['RateLimit', quota])
}

/** The last policy's `RateLimit-Policy` member: a service answers for the same few policies over and over. */
let lastMember: { name: string; limit: number; periodMs: number; algorithm: AlgorithmName | undefined; text: string } | undefined

/** One policy's `RateLimit-Policy` member: `"name";q=100;w=60`. */
function policyMember(view: QuotaView): string {
  const last = lastMember
  if (
    last !== undefined &&
    last.name === view.name &&
    last.limit === view.limit &&
    last.periodMs === view.periodMs &&
    last.algorithm === view.algorithm
  ) {
    return last.text
  }
  const text = `${sfString(view.name)};q=${view.limit}${quotaUnitParameter(view)};w=${windowSeconds(view)}`
  lastMember = { name: view.name, limit: view.limit, periodMs: view.periodMs, algorithm: view.algorithm, text }
  return text
}

/**
 * `Retry-After` in whole seconds, ceiled and at least 1: never earlier than the real wait. Empty when
 * allowed, and when the request can never pass (`Decision.never`): RFC 9110 has a server send it
 * when a condition is temporary, and no wait would make this one pass.
 */
export function retryAfterHeader(decision: Decision): HeaderList {
  if (decision.allowed || decision.never === true) return []
  return [['Retry-After', String(retryAfterSeconds(decision))]]
}

/** The wait a denied client is told, in whole seconds (ceiled, ≥ 1). */
export function retryAfterSeconds(decision: Pick<Decision, 'retryAfterMs'>): number {
  return Math.max(1, Math.ceil(decision.retryAfterMs / 1000))
}

/** Each style's headers, appended to the list being built. */
const STYLE_WRITERS: Record<HeaderStyle, (headers: HeaderList, decision: Decision, nowMs: number) => void> = {
  legacy: addLegacyHeaders,
  'draft-6': (headers, decision) => headers.push(...draft6Headers(decision)),
  'draft-7': (headers, decision) => headers.push(...draft7Headers(decision)),
  'draft-8': addDraft8Headers,
}

/** Every header for a decision in the chosen styles, plus `Retry-After` when it was denied. */
export function rateLimitHeaders(decision: Decision, styles: readonly HeaderStyle[], nowMs: number): HeaderList {
  const headers: HeaderList = []
  for (let i = 0; i < styles.length; i++) STYLE_WRITERS[styles[i]](headers, decision, nowMs)
  if (!decision.allowed && decision.never !== true) headers.push(['Retry-After', String(retryAfterSeconds(decision))])
  return headers
}

// The last plain name quoted: the usual answer names the same policy as the one before.
let lastPlain: string | undefined
let lastQuoted = ''

// Printable ASCII but `"` and `\`: the usual policy name, quoted as it is (a test instead of a loop per character).
const PLAIN_SF_STRING = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/

/**
 * An RFC 8941 String: quotes and backslashes escaped; characters outside printable ASCII (which
 * a String cannot hold) become `?`, so a policy name can never break the header.
 */
export function sfString(text: string): string {
  if (text === lastPlain) return lastQuoted
  if (PLAIN_SF_STRING.test(text)) {
    lastQuoted = `"${text}"`
    lastPlain = text
    return lastQuoted
  }
  let out = '"'
  for (const char of text) {
    const code = char.codePointAt(0)!
    if (char === '"' || char === '\\') out += `\\${char}`
    else if (code < 0x20 || code > 0x7e) out += '?'
    else out += char
  }
  return `${out}"`
}
