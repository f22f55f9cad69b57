// Reads Envoy RLS v3 requests — from gRPC (decoded messages) and from protobuf-JSON (`POST /json`) — into Decider input.

import { z } from 'zod'
import { FloodgateError } from 'floodgate'
import { ENVOY_UNITS, isEnvoyUnit, unitOfNumber } from 'floodgate/rules'
import type { DecideInput, DescriptorInput } from './decide.js'

/** A decoded `RateLimitRequest` (snake_case names; an unset message is null; a unit by number or by name). */
export interface GrpcRateLimitRequest {
  domain: string
  descriptors: {
    entries: { key: string; value: string }[]
    limit: { requests_per_unit: number; unit: string | number } | null
    hits_addend: { value: number } | null
  }[]
  hits_addend: number
}

const UNIT_LIST = ENVOY_UNITS.join(', ')

/** Decider input from a gRPC request; the request's hits_addend of 0 means 1, a descriptor's means "check only". */
export function fromGrpcRequest(request: GrpcRateLimitRequest): DecideInput {
  return {
    domain: request.domain,
    hits: request.hits_addend === 0 ? 1 : request.hits_addend,
    requestHits: request.hits_addend,
    descriptors: request.descriptors.map((d, i) =>
      descriptorInput(
        i,
        d.entries,
        d.limit ? { requestsPerUnit: d.limit.requests_per_unit, unit: d.limit.unit } : undefined,
        d.hits_addend?.value,
      ),
    ),
  }
}

function descriptorInput(
  index: number,
  entries: { key: string; value: string }[],
  limit: { requestsPerUnit: number; unit: string | number } | undefined,
  hits: number | undefined,
): DescriptorInput {
  const input: DescriptorInput = { entries: entries.map((e) => ({ key: e.key, value: e.value })) }
  if (hits !== undefined) input.hits = hits
  if (limit !== undefined) {
    const name =
      typeof limit.unit === 'number' ? (unitOfNumber(limit.unit) ?? (limit.unit === 0 ? 'UNKNOWN' : String(limit.unit))) : limit.unit
    const unit = isEnvoyUnit(name) ? name : undefined
    if (unit === undefined) {
      throw new FloodgateError(
        'INVALID_REQUEST',
        `descriptors[${index}].limit.unit: ${JSON.stringify(name)} is not a unit; use one of ${UNIT_LIST}`,
      )
    }
    // requests_per_unit 0 is a valid override, as upstream: every hit is over the limit.
    input.limit = { requestsPerUnit: limit.requestsPerUnit, unit }
  }
  return input
}

// protobuf-JSON, as protojson reads it: camelCase or the original field names, 64-bit integers as
// numbers or strings, enums by name or number, and an unknown field is an error (upstream answers 400).
const uint32 = z
  .union([z.number().int().min(0).max(0xffffffff), z.string().regex(/^\d+$/).transform(Number)])
  .refine((n) => n <= 0xffffffff, 'must be a uint32')
// Any uint64, as upstream takes it. A hits addend becomes a number: above 2^53 it is rounded, but
// never down to 2^53 or below, and any cost that large is above every limit (policies are capped
// at 2^53 - 1), so it is denied, never admitted by a rounding.
const UINT64_MAX = 2n ** 64n - 1n
const UINT64_RANGE = 'must be a uint64: a whole number from 0 to 18446744073709551615'
const uint64 = z.union([z.number(), z.string()]).transform((value, context) => {
  // A JSON number above 2^53 arrives rounded (2^64 - 1 itself reads as 2^64): accepted up to there.
  if (typeof value === 'number' ? Number.isInteger(value) && value >= 0 && value <= 2 ** 64 : isUint64Text(value)) return Number(value)
  context.addIssue({ code: 'custom', message: UINT64_RANGE })
  return z.NEVER
})

function isUint64Text(text: string): boolean {
  return /^\d{1,20}$/.test(text) && BigInt(text) <= UINT64_MAX
}
const unit = z.union([z.string(), z.number().int()])
const entry = z.strictObject({ key: z.string().default(''), value: z.string().default('') })
const override = z
  .strictObject({ requestsPerUnit: uint32.optional(), requests_per_unit: uint32.optional(), unit: unit.optional() })
  .transform((o) => ({ requestsPerUnit: o.requestsPerUnit ?? o.requests_per_unit ?? 0, unit: o.unit ?? 'UNKNOWN' }))
const descriptor = z
  .strictObject({
    entries: z.array(entry).default([]),
    limit: override.optional(),
    hitsAddend: uint64.optional(),
    hits_addend: uint64.optional(),
  })
  .transform((d) => ({ entries: d.entries, limit: d.limit, hits: d.hitsAddend ?? d.hits_addend }))
const jsonRequest = z
  .strictObject({
    domain: z.string().default(''),
    descriptors: z.array(descriptor).default([]),
    hitsAddend: uint32.optional(),
    hits_addend: uint32.optional(),
  })
  .transform((r) => ({ domain: r.domain, descriptors: r.descriptors, hits: r.hitsAddend ?? r.hits_addend ?? 0 }))

/** Decider input from a protobuf-JSON `RateLimitRequest`; FloodgateError (INVALID_REQUEST) names what is wrong. */
export function fromProtoJson(body: unknown): DecideInput {
  const parsed = jsonRequest.safeParse(body)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]
    const where = issue.path.join('.') || 'body'
    const message =
      issue.code === 'unrecognized_keys' ? `unknown field ${issue.keys.map((k) => JSON.stringify(k)).join(', ')}` : issue.message
    throw new FloodgateError('INVALID_REQUEST', `${where}: ${message}`)
  }
  const request = parsed.data
  return {
    domain: request.domain,
    hits: request.hits === 0 ? 1 : request.hits,
    requestHits: request.hits,
    descriptors: request.descriptors.map((d, i) => descriptorInput(i, d.entries, d.limit, d.hits)),
  }
}
