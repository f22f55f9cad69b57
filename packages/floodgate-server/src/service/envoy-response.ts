// Builds Envoy RLS v3 answers from decisions: the gRPC message and its protobuf-JSON form for `POST /json`.

import type { Policy } from 'floodgate'
import { ENVOY_UNITS, UNIT_MS, type EnvoyUnit } from 'floodgate/rules'
import type { DecideInput, DecideResult, DescriptorOutcome } from './decide.js'

export type RlsCode = 'UNKNOWN' | 'OK' | 'OVER_LIMIT'
export type RlsUnit = EnvoyUnit

/** `google.protobuf.Duration`, whole seconds and nanoseconds. */
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

/** `RateLimitResponse` with the .proto's snake_case names and enums by name; `envoy-codec.ts` writes it. */
export interface RlsResponse {
  overall_code: RlsCode
  statuses: RlsDescriptorStatus[]
  response_headers_to_add: RlsHeader[]
  /** Plain JSON here; the gRPC codec writes it as a `google.protobuf.Struct`. */
  dynamic_metadata: Record<string, unknown> | null
}

/** The header names upstream's LIMIT_RESPONSE_HEADERS_ENABLED adds (LIMIT_LIMIT_HEADER, …). */
export interface ResponseHeaderNames {
  limit: string
  remaining: string
  reset: string
}

export const DEFAULT_HEADER_NAMES: ResponseHeaderNames = Object.freeze({
  limit: 'RateLimit-Limit',
  remaining: 'RateLimit-Remaining',
  reset: 'RateLimit-Reset',
})

export interface RlsResponseOptions {
  /** Milliseconds since the epoch: `duration_until_reset` of a unit window is `unit - now % unit` whole seconds, as upstream. */
  now: number
  /** Add the three rate-limit headers under these names; undefined adds none. */
  headers?: ResponseHeaderNames
  /** Upstream's RESPONSE_DYNAMIC_METADATA: describe the request and the passed rules' `metadata`. */
  dynamicMetadataOf?: DecideInput
}

/** `limit_remaining` of an unlimited descriptor, as upstream (the largest uint32). */
export const UNLIMITED_REMAINING = 4_294_967_295

/**
 * The Envoy `RateLimit` that describes `policy`. A policy whose period is exactly one unit maps
 * exactly. Any other period (a `limits:` extension rule, e.g. 100 per 10s) is reported as the same
 * rate in the unit nearest to its period on a log scale, rounded and at least 1 (100 per 10s →
 * 600 per MINUTE), since Envoy can only express whole units.
 */
export function envoyLimitOf(policy: Policy, name: string): RlsRateLimit {
  let best: RlsUnit = 'SECOND'
  for (const unit of ENVOY_UNITS) {
    if (Math.abs(Math.log(UNIT_MS[unit] / policy.periodMs)) < Math.abs(Math.log(UNIT_MS[best] / policy.periodMs))) best = unit
  }
  const perUnit = Math.max(1, Math.round((policy.limit * UNIT_MS[best]) / policy.periodMs))
  return { name, requests_per_unit: perUnit, unit: best }
}

/** The answer for a decided request. */
export function toRlsResponse(result: DecideResult, options: RlsResponseOptions): RlsResponse {
  const statuses = result.outcomes.map((outcome) => statusOf(outcome, options.now))
  return {
    overall_code: result.allowed ? 'OK' : 'OVER_LIMIT',
    statuses,
    response_headers_to_add: options.headers ? rateLimitHeaders(result.outcomes, statuses, options.headers) : [],
    dynamic_metadata: options.dynamicMetadataOf ? dynamicMetadata(options.dynamicMetadataOf, result.outcomes) : null,
  }
}

function statusOf(outcome: DescriptorOutcome, now: number): RlsDescriptorStatus {
  if (outcome.kind === 'unmatched') return { code: 'OK', current_limit: null, limit_remaining: 0, duration_until_reset: null }
  // An allow-listed value has no limit of its own: upstream finds none there and answers 0, as for
  // no match; only `unlimited: true` answers the largest uint32.
  if (outcome.kind === 'unlimited') {
    const remaining = outcome.allowListed ? 0 : UNLIMITED_REMAINING
    return { code: 'OK', current_limit: null, limit_remaining: remaining, duration_until_reset: null }
  }
  const code = outcome.allowed ? 'OK' : 'OVER_LIMIT'
  const { envoy } = outcome
  if (envoy !== undefined) {
    const unitSeconds = UNIT_MS[envoy.unit] / 1000
    return {
      code,
      current_limit: { name: envoy.name, requests_per_unit: envoy.requestsPerUnit, unit: envoy.unit },
      limit_remaining: outcome.decision.remaining,
      duration_until_reset: { seconds: unitSeconds - (Math.floor(now / 1000) % unitSeconds), nanos: 0 },
    }
  }
  const { decision, policy, rule } = outcome
  const waitMs = outcome.allowed ? decision.resetMs : Math.max(decision.resetMs, decision.retryAfterMs)
  return {
    code,
    current_limit: envoyLimitOf(policy, rule?.name ?? policy.name),
    limit_remaining: decision.remaining,
    duration_until_reset: { seconds: Math.ceil(waitMs / 1000), nanos: 0 },
  }
}

/**
 * As upstream: the headers describe the descriptor with the least `limit_remaining` among those
 * with a limit, unless a (non-quota) descriptor is over, which then speaks (the last such one).
 */
function rateLimitHeaders(
  outcomes: readonly DescriptorOutcome[],
  statuses: readonly RlsDescriptorStatus[],
  names: ResponseHeaderNames,
): RlsHeader[] {
  let chosen: RlsDescriptorStatus | undefined
  let least = UNLIMITED_REMAINING
  for (let i = 0; i < statuses.length; i++) {
    const status = statuses[i]
    const outcome = outcomes[i]
    if (status.current_limit !== null && status.limit_remaining < least) {
      chosen = status
      least = status.limit_remaining
    }
    if (status.code === 'OVER_LIMIT' && outcome.kind === 'limited' && !outcome.quota) {
      chosen = status
      least = 0
    }
  }
  if (chosen?.current_limit == null) return []
  return [
    { key: names.limit, value: String(chosen.current_limit.requests_per_unit) },
    { key: names.remaining, value: String(chosen.limit_remaining) },
    { key: names.reset, value: String(chosen.duration_until_reset?.seconds ?? 0) },
  ]
}

/**
 * Upstream's RESPONSE_DYNAMIC_METADATA: the domain, each descriptor (`key=value` entries, its
 * override and hits addend), the request's hits addend when given, and the `metadata:` of every
 * rule that passed, merged (the first value of a key wins; nested mappings merge).
 */
function dynamicMetadata(request: DecideInput, outcomes: readonly DescriptorOutcome[]): Record<string, unknown> {
  const metadata: Record<string, unknown> = {
    domain: request.domain,
    descriptors: request.descriptors.map((d) => {
      const described: Record<string, unknown> = { entries: d.entries.map((e) => `${e.key}=${e.value}`) }
      if (d.limit !== undefined) described.limit = `requests_per_unit:${d.limit.requestsPerUnit} unit:${d.limit.unit}`
      if (d.hits !== undefined) described.hitsAddend = d.hits
      return described
    }),
  }
  if (request.requestHits !== undefined && request.requestHits !== 0) metadata.hitsAddend = request.requestHits
  const passed: Record<string, unknown> = {}
  for (const outcome of outcomes) {
    if (outcome.kind !== 'limited' || !outcome.allowed || outcome.rule?.metadata === undefined) continue
    mergeInto(passed, outcome.rule.metadata)
  }
  if (Object.keys(passed).length > 0) metadata.metadata = passed
  return metadata
}

function mergeInto(target: Record<string, unknown>, source: Readonly<Record<string, unknown>>): void {
  for (const [key, value] of Object.entries(source)) {
    if (!Object.hasOwn(target, key)) {
      target[key] = isPlainObject(value) ? structuredClone(value) : value
    } else if (isPlainObject(target[key]) && isPlainObject(value)) {
      mergeInto(target[key] as Record<string, unknown>, value)
    }
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/**
 * The protobuf-JSON form of an answer, as envoyproxy/ratelimit's `POST /json` writes it with
 * protojson: camelCase names, enums by name, durations as "12s", default values omitted.
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
    if (s.duration_until_reset) status.durationUntilReset = `${s.duration_until_reset.seconds}s`
    return status
  })
  if (response.response_headers_to_add.length > 0) json.responseHeadersToAdd = response.response_headers_to_add
  if (response.dynamic_metadata !== null) json.dynamicMetadata = response.dynamic_metadata
  return json
}
