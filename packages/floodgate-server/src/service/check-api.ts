// The `POST /v1/check` API: request validation, the JSON answer, and the rate-limit headers that go with it.

import { z } from 'zod'
import { type Decision, FloodgateError } from 'floodgate'
import { DEFAULT_HEADER_STYLES, type HeaderList, rateLimitHeaders } from 'floodgate/http'
import type { CheckResponse, DescriptorResult } from 'floodgate/api'
import type { DecideInput, DecideResult, DescriptorInput, DescriptorOutcome, Entry } from './decide.js'

/** Most descriptors one check may carry: each is a store call, so an unbounded list is a cheap flood. */
export const MAX_DESCRIPTORS = 64
/** Most entries per descriptor (Envoy configs nest a handful of levels). */
export const MAX_ENTRIES = 16
/**
 * Most hits one check may charge: any uint64, as Envoy's hits_addend. JSON numbers above 2^53 are
 * rounded, never down to a cost a policy could admit (limits are at most 2^53 - 1): they are denied.
 */
const MAX_HITS = 2 ** 64

const checkBody = z
  .object(
    {
      domain: z.string({ error: 'expected a string' }).min(1, 'must not be empty; name the rules domain'),
      descriptors: z
        .array(
          z
            .array(
              z.object(
                {
                  key: z.string({ error: 'expected a string' }).min(1, 'must not be empty'),
                  value: z.string({ error: 'expected a string' }),
                },
                { error: 'expected { "key": "…", "value": "…" }' },
              ),
              { error: 'expected a list of { "key", "value" } entries' },
            )
            .min(1, 'a descriptor needs at least one entry')
            .max(MAX_ENTRIES, `at most ${MAX_ENTRIES} entries per descriptor`),
          { error: 'expected a list of descriptors, each a list of { "key", "value" } entries' },
        )
        .min(1, 'give at least one descriptor')
        .max(MAX_DESCRIPTORS, `at most ${MAX_DESCRIPTORS} descriptors per request`),
      hits: z
        .number({ error: 'expected a whole number ≥ 0' })
        // Not zod's .int(), which stops at 2^53: larger hits are decided (denied), not refused.
        .refine((hits) => Number.isInteger(hits) && hits >= 0, 'expected a whole number ≥ 0')
        .refine((hits) => hits <= MAX_HITS, 'at most 18446744073709551615 (a uint64, as Envoy’s hits_addend)')
        .optional(),
    },
    {
      // Unknown fields are refused: a misspelt `hits` must not silently charge 1.
      error: (issue) =>
        issue.code === 'unrecognized_keys'
          ? `unknown field ${issue.keys.map((k) => JSON.stringify(k)).join(', ')}; the fields are domain, descriptors and hits`
          : 'expected a JSON object { "domain", "descriptors", "hits"? }',
    },
  )
  .strict()

/** Decider input from a `/v1/check` body; FloodgateError (INVALID_REQUEST) says which field is wrong and how. */
export function parseCheckRequest(body: unknown): DecideInput {
  return readWellFormedCheck(body) ?? parseCheckRequestWithSchema(body)
}

/** The same through the zod schema alone: any body, with the precise reason when it is wrong. */
export function parseCheckRequestWithSchema(body: unknown): DecideInput {
  const parsed = checkBody.safeParse(body)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]
    const path = issue.path.length > 0 ? issue.path.join('.') : 'body'
    throw new FloodgateError('INVALID_REQUEST', `${path}: ${issue.message}`)
  }
  const { domain, descriptors, hits } = parsed.data
  return { domain, hits: hits ?? 1, descriptors: descriptors.map((entries) => ({ entries })) }
}

/**
 * The usual body read by hand, about a microsecond less per request than zod: undefined unless
 * the schema would accept it unchanged, so every other body still gets zod's reason. Entries are
 * copied to `{ key, value }`, as the schema strips any other field of an entry.
 */
function readWellFormedCheck(body: unknown): DecideInput | undefined {
  if (!isRecord(body)) return undefined
  for (const field in body) if (field !== 'domain' && field !== 'descriptors' && field !== 'hits') return undefined
  const { domain, descriptors, hits } = body
  if (typeof domain !== 'string' || domain === '') return undefined
  if (hits !== undefined && !(typeof hits === 'number' && Number.isInteger(hits) && hits >= 0 && hits <= MAX_HITS)) return undefined
  if (!Array.isArray(descriptors) || descriptors.length === 0 || descriptors.length > MAX_DESCRIPTORS) return undefined
  const inputs: DescriptorInput[] = new Array(descriptors.length)
  for (let d = 0; d < descriptors.length; d++) {
    const list: unknown = descriptors[d]
    if (!Array.isArray(list) || list.length === 0 || list.length > MAX_ENTRIES) return undefined
    const entries: Entry[] = new Array(list.length)
    for (let e = 0; e < list.length; e++) {
      const entry: unknown = list[e]
      if (!isRecord(entry)) return undefined
      const { key, value } = entry
      if (typeof key !== 'string' || key === '' || typeof value !== 'string') return undefined
      entries[e] = { key, value }
    }
    inputs[d] = { entries }
  }
  return { domain, hits: hits ?? 1, descriptors: inputs }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/**
 * The `/v1/check` answer: one result per descriptor, and the longest wait among denied ones. A
 * descriptor whose hits exceed what its rule could ever admit says `never: true` (and so does the
 * answer), with `retryAfterMs` 0: no wait helps. The status stays 429, the verdict of the check:
 * 413 already means "this check body is too large", and callers read the verdict from the body.
 */
export function toCheckResponse(result: DecideResult): CheckResponse {
  let retryAfterMs = 0
  let never = false
  const results = result.outcomes.map((outcome): DescriptorResult => {
    if (outcome.kind === 'unmatched')
      return outcome.replaced === undefined ? { allowed: true, rule: null } : { allowed: true, rule: outcome.replaced, replaced: true }
    if (outcome.kind === 'unlimited') return { allowed: true, rule: outcome.ruleId, unlimited: true }
    const { decision } = outcome
    const retry = outcome.allowed ? 0 : decision.retryAfterMs
    retryAfterMs = Math.max(retryAfterMs, retry)
    const answer: DescriptorResult = {
      allowed: outcome.allowed,
      rule: outcome.ruleId,
      policy: decision.policy,
      limit: decision.limit,
      remaining: decision.remaining,
      resetMs: decision.resetMs,
      retryAfterMs: retry,
      shadow: outcome.rule?.shadow ?? false,
      wouldDeny: outcome.wouldDeny,
      source: decision.source,
    }
    if (!outcome.allowed && decision.never === true) {
      answer.never = true
      never = true
    }
    return answer
  })
  return never ? { allowed: result.allowed, retryAfterMs, never: true, results } : { allowed: result.allowed, retryAfterMs, results }
}

/**
 * The `/v1/check` answer's JSON schema, for Fastify's compiled serializer (a third of
 * JSON.stringify's time for this answer). Lists every field of every result kind in the order
 * toCheckResponse writes them, so the text is exactly JSON.stringify's; a field missing here
 * would be dropped from the answer.
 */
export const CHECK_RESPONSE_SCHEMA = {
  type: 'object',
  properties: {
    allowed: { type: 'boolean' },
    retryAfterMs: { type: 'number' },
    never: { type: 'boolean' },
    results: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          allowed: { type: 'boolean' },
          rule: { type: ['string', 'null'] },
          replaced: { type: 'boolean' },
          unlimited: { type: 'boolean' },
          policy: { type: 'string' },
          limit: { type: 'number' },
          remaining: { type: 'number' },
          resetMs: { type: 'number' },
          retryAfterMs: { type: 'number' },
          shadow: { type: 'boolean' },
          wouldDeny: { type: 'boolean' },
          source: { type: 'string' },
          never: { type: 'boolean' },
        },
      },
    },
  },
} as const

/**
 * Headers for the whole answer, from its headline descriptor: the denied one with the longest
 * wait, else the one with the least remaining. Legacy `X-RateLimit-*` plus the structured IETF
 * fields, and `Retry-After` on a 429. Nothing when no descriptor was limited.
 */
export function checkHeaders(result: DecideResult, nowMs: number): HeaderList {
  let headline: Extract<DescriptorOutcome, { kind: 'limited' }> | undefined
  for (const o of result.outcomes) {
    if (o.kind !== 'limited') continue
    if (headline === undefined || rank(o) > rank(headline)) headline = o
  }
  if (headline === undefined) return []
  return rateLimitHeaders(answered(headline), DEFAULT_HEADER_STYLES, nowMs)
}

// A denial that can never pass outranks any wait: its headers (no Retry-After) speak for the answer.
function rank(o: Extract<DescriptorOutcome, { kind: 'limited' }>): number {
  if (o.allowed) return -o.decision.remaining
  return o.decision.never === true ? Number.POSITIVE_INFINITY : Number.MAX_SAFE_INTEGER / 2 + o.decision.retryAfterMs
}

/** A shadow rule answers allowed even when its decision denied: the headers must say so too. */
function answered(outcome: Extract<DescriptorOutcome, { kind: 'limited' }>): Decision {
  return outcome.allowed && !outcome.decision.allowed ? { ...outcome.decision, allowed: true, retryAfterMs: 0 } : outcome.decision
}
