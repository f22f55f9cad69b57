// Bodies of a rejection (429, or 413 for a request that can never pass): a JSON object a person can
// read, or RFC 9457 application/problem+json.

import { formatDuration } from '../core/duration.js'
import type { Decision } from '../limiter/types.js'
import { retryAfterSeconds } from './headers.js'

/** `json` (default): `{ error, message, retryAfter, policy }`; `problem`: application/problem+json. */
export type BodyFormat = 'json' | 'problem'

/** The problem type the IETF rate-limit draft registers for an exceeded quota. */
export const QUOTA_EXCEEDED_TYPE = 'https://iana.org/assignments/http-problem-types#quota-exceeded'

/** A rejection ready to send: status, content type and serialized body. */
export interface RejectBody {
  /** 429 Too Many Requests; 413 Content Too Large when the request can never pass (`Decision.never`). */
  status: 429 | 413
  contentType: string
  body: string
}

/** The default JSON body's shape. */
export interface RateLimitedBody {
  error: 'rate_limited'
  message: string
  /** Seconds to wait, the same number as `Retry-After`. */
  retryAfter: number
  /** The policy that denied. */
  policy: string
}

/** The default JSON body when the request can never pass: no `retryAfter`, since no wait helps. */
export interface NeverAdmittedBody {
  error: 'cost_exceeds_limit'
  message: string
  /** The policy whose capacity the request's cost exceeds. */
  policy: string
  never: true
}

/** The problem+json body's shape (`violated-policies` as the draft names it). */
export interface QuotaExceededProblem {
  type: string
  title: string
  status: number
  detail: string
  'violated-policies': string[]
}

/**
 * "Rate limit exceeded: 100 requests per 1m" — the denying policy in words; a concurrency policy
 * limits requests in flight, not per period: "Rate limit exceeded: 5 concurrent requests".
 */
export function rateLimitMessage(decision: Decision): string {
  const part = decision.policies.find((p) => p.name === decision.policy)
  const unit = decision.limit === 1 ? 'request' : 'requests'
  if (part?.algorithm === 'concurrency') return `Rate limit exceeded: ${decision.limit} concurrent ${unit}`
  const period = part !== undefined && part.periodMs > 0 ? ` per ${formatDuration(part.periodMs)}` : ''
  return `Rate limit exceeded: ${decision.limit} ${unit}${period}`
}

/** The names of every policy that denied (the deciding one when the decision lists none). */
export function violatedPolicies(decision: Decision): string[] {
  const denied = decision.policies.filter((p) => !p.allowed).map((p) => p.name)
  return denied.length > 0 ? denied : [decision.policy]
}

/** `{"error":"rate_limited","message":"Rate limit exceeded: 100 requests per 1m","retryAfter":30,"policy":"burst"}` */
export function rateLimitedBody(decision: Decision): RateLimitedBody {
  return {
    error: 'rate_limited',
    message: rateLimitMessage(decision),
    retryAfter: retryAfterSeconds(decision),
    policy: decision.policy,
  }
}

/** The draft's quota-exceeded problem (RFC 9457), naming every violated policy. */
export function quotaExceededProblem(decision: Decision): QuotaExceededProblem {
  return {
    type: QUOTA_EXCEEDED_TYPE,
    title: 'Request cannot be satisfied as assigned quota has been exceeded',
    status: 429,
    detail: `${rateLimitMessage(decision)}; retry in ${retryAfterSeconds(decision)}s`,
    'violated-policies': violatedPolicies(decision),
  }
}

/** "Request exceeds what the rate limit can ever admit at once (5 requests per 1m); it will never pass: send a smaller one" */
export function neverAdmittedMessage(decision: Decision): string {
  const limit = rateLimitMessage(decision).replace(/^Rate limit exceeded: /, '')
  return `Request exceeds what the rate limit can ever admit at once (${limit}); it will never pass: send a smaller one`
}

/** `{"error":"cost_exceeds_limit","message":"Request exceeds what …","policy":"burst","never":true}` */
export function neverAdmittedBody(decision: Decision): NeverAdmittedBody {
  return { error: 'cost_exceeds_limit', message: neverAdmittedMessage(decision), policy: decision.policy, never: true }
}

/**
 * The status, content type and body of a rejection in the chosen format: 429 for a request over its
 * limit; 413 Content Too Large, without `Retry-After`, for one whose cost exceeds what a policy could
 * ever admit (`Decision.never`). 413 because RFC 9110 defines it as a request larger than the server
 * is willing to process, which is what it is (in quota units), and because clients and proxies do
 * not retry it, where they retry 429 forever; the problem type stays the draft's quota-exceeded,
 * whose title (the request exceeds the assigned quota) is true of it.
 */
export function rejectBody(decision: Decision, format: BodyFormat): RejectBody {
  if (decision.never === true) {
    if (format === 'problem') {
      const problem: QuotaExceededProblem = { ...quotaExceededProblem(decision), status: 413, detail: neverAdmittedMessage(decision) }
      return { status: 413, contentType: 'application/problem+json', body: JSON.stringify(problem) }
    }
    return { status: 413, contentType: 'application/json; charset=utf-8', body: JSON.stringify(neverAdmittedBody(decision)) }
  }
  if (format === 'problem') {
    return { status: 429, contentType: 'application/problem+json', body: JSON.stringify(quotaExceededProblem(decision)) }
  }
  return { status: 429, contentType: 'application/json; charset=utf-8', body: JSON.stringify(rateLimitedBody(decision)) }
}
