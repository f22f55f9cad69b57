// Reads Envoy RLS v3 requests — from gRPC (proto-loader objects) and from protobuf-JSON (`POST /json`) — into Decider input.

import { z } from 'zod'
import { FloodgateError } from 'floodgate'
import { OVERRIDE_UNIT_MS, type DecideInput, type DescriptorInput, type OverrideUnit } from './decide.js'

/** A `RateLimitRequest` as @grpc/proto-loader hands it over (keepCase, enums as names, defaults filled). */
export interface GrpcRateLimitRequest {
  domain: string
  descriptors: {
    entries: { key: string; value: string }[]
    limit: { requests_per_unit: number; unit: string } | null
    hits_addend: { value: number } | null
  }[]
  hits_addend: number
}

/** Decider input from a gRPC request; the request's hits_addend of 0 means 1, a descriptor's means "check only". */
export function fromGrpcRequest(request: GrpcRateLimitRequest): DecideInput {
  return {
    domain: request.domain,
    hits: request.hits_addend === 0 ? 1 : request.hits_addend,
    descriptors: request.descriptors.map((d, i) =>
      descriptorInput(i, d.entries, d.limit ? { requestsPerUnit: d.limit.requests_per_unit, unit: d.limit.unit } : undefined, d.hits_addend?.value),
    ),
  }
}

function descriptorInput(
  index: number,
  entries: { key: string; value: string }[],
  limit: { requestsPerUnit: number; unit: string } | undefined,
  hits: number | undefined,
): DescriptorInput {
  const input: DescriptorInput = { entries: entries.map((e) => ({ key: e.key, value: e.value })) }
  if (hits !== undefined) input.hits = hits
  if (limit !== undefined) {
    if (!(limit.unit in OVERRIDE_UNIT_MS)) {
      throw new FloodgateError('INVALID_REQUEST', `descriptors[${index}].limit.unit: ${JSON.stringify(limit.unit)} is not a unit; use one of ${Object.keys(OVERRIDE_UNIT_MS).join(', ')}`)
    }
    if (limit.requestsPerUnit < 1) {
      throw new FloodgateError('INVALID_REQUEST', `descriptors[${index}].limit.requests_per_unit: must be at least 1`)
    }
    input.limit = { requestsPerUnit: limit.requestsPerUnit, unit: limit.unit as OverrideUnit }
  }
  return input
}

// protobuf-JSON accepts the camelCase and the original field names; 64-bit integers may be strings.
const uint = z.union([z.number().int().nonnegative(), z.string().regex(/^\d+$/).transform(Number)])
const unit = z.union([z.string(), z.number().int().transform((n) => ['UNKNOWN', 'SECOND', 'MINUTE', 'HOUR', 'DAY', 'MONTH', 'YEAR'][n] ?? 'UNKNOWN')])
const entry = z.object({ key: z.string().default(''), value: z.string().default('') })
const override = z
  .object({ requestsPerUnit: uint.optional(), requests_per_unit: uint.optional(), unit: unit.optional() })
  .transform((o) => ({ requestsPerUnit: o.requestsPerUnit ?? o.requests_per_unit ?? 0, unit: o.unit ?? 'UNKNOWN' }))
const descriptor = z
  .object({
    entries: z.array(entry).default([]),
    limit: override.optional(),
    hitsAddend: uint.optional(),
    hits_addend: uint.optional(),
  })
  .transform((d) => ({ entries: d.entries, limit: d.limit, hits: d.hitsAddend ?? d.hits_addend }))
const jsonRequest = z
  .object({
    domain: z.string().default(''),
    descriptors: z.array(descriptor).default([]),
    hitsAddend: uint.optional(),
    hits_addend: uint.optional(),
  })
  .transform((r) => ({ domain: r.domain, descriptors: r.descriptors, hits: r.hitsAddend ?? r.hits_addend ?? 0 }))

/** Decider input from a protobuf-JSON `RateLimitRequest`; FloodgateError (INVALID_REQUEST) names what is wrong. */
export function fromProtoJson(body: unknown): DecideInput {
  const parsed = jsonRequest.safeParse(body)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]
    throw new FloodgateError('INVALID_REQUEST', `${issue.path.join('.') || 'body'}: ${issue.message}`)
  }
  const request = parsed.data
  return {
    domain: request.domain,
    hits: request.hits === 0 ? 1 : request.hits,
    descriptors: request.descriptors.map((d, i) => descriptorInput(i, d.entries, d.limit, d.hits)),
  }
}
