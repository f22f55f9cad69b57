// Builds Envoy RLS v3 answers from decisions: the gRPC message and its protobuf-JSON form for `POST /json`.

import type { Policy } from 'floodgate'
import type { DecideResult, DescriptorOutcome } from './decide.js'

export type RlsCode = 'UNKNOWN' | 'OK' | 'OVER_LIMIT'
export type RlsUnit = 'SECOND' | 'MINUTE' | 'HOUR' | 'DAY' | 'WEEK' | 'MONTH' | 'YEAR'

/** `google.protobuf.Duration` as @grpc/proto-loader reads and writes it. */
export interface ProtoDuration {
  seconds: number
  nanos: number
}

/** `RateLimitResponse.RateLimit`, snake_case as in the .proto. */
export interface RlsRateLimit {
  name: string
  requests_per_unit: number
  unit: RlsUnit
}

export interface RlsDescriptorStatus {
  code: RlsCode
  current_limit: RlsRateLimit | null
  limit_remaining: number
  duration_until_reset: ProtoDuration | null
}

export interface RlsHeader {
  key: string
  value: string
}

/** `RateLimitResponse` in the shape @grpc/proto-loader (keepCase) serializes. */
export interface RlsResponse {
  overall_code: RlsCode
  statuses: RlsDescriptorStatus[]
  response_headers_to_add: RlsHeader[]
}

const UNIT_MS: Readonly<Record<RlsUnit, number>> = {
  SECOND: 1_000,
  MINUTE: 60_000,
  HOUR: 3_600_000,
  DAY: 86_400_000,
  WEEK: 7 * 86_400_000,
  MONTH: 30 * 86_400_000,
  YEAR: 365 * 86_400_000,
}

/**
 * The Envoy `RateLimit` that describes `policy`. A policy whose period is exactly one unit (every
 * rule written as `rate_limit: { unit, requests_per_unit }`) maps exactly. Any other period (a
 * `limits:` extension rule, e.g. 100 per 10s) is reported as the same rate in the unit nearest to
 * its period on a log scale, rounded and at least 1 (100 per 10s → 600 per MINUTE), since Envoy
 * can only express whole units.
 */
export function envoyLimitOf(policy: Policy, name: string): RlsRateLimit {
  let best: RlsUnit = 'SECOND'
  for (const unit of Object.keys(UNIT_MS) as RlsUnit[]) {
    if (Math.abs(Math.log(UNIT_MS[unit] / policy.periodMs)) < Math.abs(Math.log(UNIT_MS[best] / policy.periodMs))) best = unit
  }
  const perUnit = Math.max(1, Math.round((policy.limit * UNIT_MS[best]) / policy.periodMs))
  return { name, requests_per_unit: perUnit, unit: best }
}

/** The gRPC answer for a decided request; `withHeaders` adds X-RateLimit-* for Envoy to pass on. */
export function toRlsResponse(result: DecideResult, withHeaders: boolean): RlsResponse {
  const statuses = result.outcomes.map(statusOf)
  return {
    overall_code: result.allowed ? 'OK' : 'OVER_LIMIT',
    statuses,
    response_headers_to_add: withHeaders ? rateLimitHeaders(result.outcomes) : [],
  }
}

function statusOf(outcome: DescriptorOutcome): RlsDescriptorStatus {
  if (outcome.kind !== 'limited') return { code: 'OK', current_limit: null, limit_remaining: 0, duration_until_reset: null }
  const { decision, policy } = outcome
  const waitMs = outcome.allowed ? decision.resetMs : Math.max(decision.resetMs, decision.retryAfterMs)
  return {
    code: outcome.allowed ? 'OK' : 'OVER_LIMIT',
    current_limit: currentLimitOf(outcome),
    limit_remaining: decision.remaining,
    duration_until_reset: { seconds: Math.floor(waitMs / 1000), nanos: (waitMs % 1000) * 1_000_000 },
  }
}

/**
 * A `rate_limit` rule reports its own unit, number and name (empty when unnamed, as upstream);
 * anything else (a request's override, a `limits:` policy) is mapped and named by its policy.
 */
function currentLimitOf(outcome: Extract<DescriptorOutcome, { kind: 'limited' }>): RlsRateLimit {
  const { rule, policy } = outcome
  const ownLimit = rule?.envoyLimit
  if (ownLimit !== undefined && rule?.policies.includes(policy)) {
    return { name: rule.name ?? '', requests_per_unit: ownLimit.requestsPerUnit, unit: ownLimit.unit }
  }
  return envoyLimitOf(policy, rule?.name ?? policy.name)
}

/**
 * Headers as envoyproxy/ratelimit adds them (`LIMIT_RESPONSE_HEADERS_ENABLED`), from the
 * descriptor with the least remaining: `X-RateLimit-Limit: 10, 10;w=60`, `…-Remaining`, `…-Reset` (s).
 */
function rateLimitHeaders(outcomes: DescriptorOutcome[]): RlsHeader[] {
  let tightest: Extract<DescriptorOutcome, { kind: 'limited' }> | undefined
  for (const o of outcomes) {
    if (o.kind === 'limited' && (tightest === undefined || o.decision.remaining < tightest.decision.remaining)) tightest = o
  }
  if (tightest === undefined) return []
  const { decision, policy } = tightest
  const windowS = Math.ceil(policy.periodMs / 1000)
  return [
    { key: 'x-ratelimit-limit', value: `${decision.limit}, ${decision.limit};w=${windowS}` },
    { key: 'x-ratelimit-remaining', value: String(decision.remaining) },
    { key: 'x-ratelimit-reset', value: String(Math.ceil(Math.max(decision.resetMs, decision.retryAfterMs) / 1000)) },
  ]
}

/**
 * The protobuf-JSON form of an answer, as envoyproxy/ratelimit's `POST /json` writes it with
 * protojson: camelCase names, enums by name, durations as "12s"/"1.500s", default values omitted.
 */
export function toProtoJson(response: RlsResponse): Record<string, unknown> {
  const json: Record<string, unknown> = { overallCode: response.overall_code }
  json.statuses = response.statuses.map((s) => {
    const status: Record<string, unknown> = { code: s.code }
    if (s.current_limit) {
      const limit: Record<string, unknown> = {}
      if (s.current_limit.requests_per_unit !== 0) limit.requestsPerUnit = s.current_limit.requests_per_unit
      limit.unit = s.current_limit.unit
      if (s.current_limit.name !== '') limit.name = s.current_limit.name
      status.currentLimit = limit
    }
    if (s.limit_remaining !== 0) status.limitRemaining = s.limit_remaining
    if (s.duration_until_reset) status.durationUntilReset = durationJson(s.duration_until_reset)
    return status
  })
  if (response.response_headers_to_add.length > 0) json.responseHeadersToAdd = response.response_headers_to_add
  return json
}

function durationJson(d: ProtoDuration): string {
  if (d.nanos === 0) return `${d.seconds}s`
  return `${d.seconds}.${String(d.nanos).padStart(9, '0').replace(/(\d{3})0{6}$/, '$1').replace(/(\d{6})000$/, '$1')}s`
}
