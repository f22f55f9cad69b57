// The `POST /v1/check` API: request validation, the JSON answer, and the rate-limit headers that go with it.

import { z } from 'zod'
import { FloodgateError } from '../core/errors.js'
import type { Decision } from '../limiter/types.js'
import { DEFAULT_HEADER_STYLES, rateLimitHeaders, type HeaderList } from '../http/headers.js'
import type { CheckResponse, DescriptorResult } from '../client/types.js'
import type { DecideInput, DecideResult, DescriptorOutcome } from './decide.js'

/** Most descriptors one check may carry: each is a store call, so an unbounded list is a cheap flood. */
export const MAX_DESCRIPTORS = 64
/** Most entries per descriptor (Envoy configs nest a handful of levels). */
export const MAX_ENTRIES = 16

const checkBody = z.object(
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
    hits: z.number({ error: 'expected a whole number ≥ 0' }).int('expected a whole number ≥ 0').min(0, 'expected a whole number ≥ 0').max(1_000_000_000).optional(),
  },
  {
    // Unknown fields are refused: a misspelt `hits` must not silently charge 1.
    error: (issue) =>
      issue.code === 'unrecognized_keys'
        ? `unknown field ${issue.keys.map((k) => JSON.stringify(k)).join(', ')}; the fields are domain, descriptors and hits`
        : 'expected a JSON object { "domain", "descriptors", "hits"? }',
  },
).strict()

/** Decider input from a `/v1/check` body; FloodgateError (INVALID_REQUEST) says which field is wrong and how. */
export function parseCheckRequest(body: unknown): DecideInput {
  const parsed = checkBody.safeParse(body)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]
    const path = issue.path.length > 0 ? issue.path.join('.') : 'body'
    throw new FloodgateError('INVALID_REQUEST', `${path}: ${issue.message}`)
  }
  const { domain, descriptors, hits } = parsed.data
  return { domain, hits: hits ?? 1, descriptors: descriptors.map((entries) => ({ entries })) }
}

/** The `/v1/check` answer: one result per descriptor, and the longest wait among denied ones. */
export function toCheckResponse(result: DecideResult): CheckResponse {
  let retryAfterMs = 0
  const results = result.outcomes.map((outcome): DescriptorResult => {
    if (outcome.kind === 'unmatched') return { allowed: true, rule: null }
    if (outcome.kind === 'unlimited') return { allowed: true, rule: outcome.ruleId, unlimited: true }
    const { decision } = outcome
    const retry = outcome.allowed ? 0 : decision.retryAfterMs
    retryAfterMs = Math.max(retryAfterMs, retry)
    return {
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
  })
  return { allowed: result.allowed, retryAfterMs, results }
}

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

function rank(o: Extract<DescriptorOutcome, { kind: 'limited' }>): number {
  return o.allowed ? -o.decision.remaining : Number.MAX_SAFE_INTEGER / 2 + o.decision.retryAfterMs
}

/** A shadow rule answers allowed even when its decision denied: the headers must say so too. */
function answered(outcome: Extract<DescriptorOutcome, { kind: 'limited' }>): Decision {
  return outcome.allowed && !outcome.decision.allowed ? { ...outcome.decision, allowed: true, retryAfterMs: 0 } : outcome.decision
}
