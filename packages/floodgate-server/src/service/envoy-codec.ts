// The gRPC wire codecs: RLS v3 and health messages read and written with protobufjs straight from the .proto files.

import { UNIT_NUMBER } from 'floodgate/rules'
import protobuf from 'protobufjs'
import type { GrpcRateLimitRequest } from './envoy-request.js'
import type { RlsCode, RlsResponse } from './envoy-response.js'

/**
 * protobufjs compiles an encoder and a decoder per message type from the .proto files when they are
 * loaded (the code its static generator would write), and they read into and write from plain
 * messages directly: no conversion into enum names and back, as @grpc/proto-loader does per call.
 */
export interface RlsCodec {
  /** Reads a `RateLimitRequest`; throws on bytes that are not one. */
  decodeRequest(bytes: Uint8Array): GrpcRateLimitRequest
  /** Writes a `RateLimitResponse`; dynamic metadata becomes a `google.protobuf.Struct`. */
  encodeResponse(response: RlsResponse): Uint8Array
  /** Reads a `grpc.health.v1.HealthCheckRequest`'s service name. */
  decodeHealthRequest(bytes: Uint8Array): string
  /** Writes a `HealthCheckResponse` with status SERVING or NOT_SERVING. */
  encodeHealthResponse(serving: boolean): Uint8Array
}

const CODES: Readonly<Record<RlsCode, number>> = { UNKNOWN: 0, OK: 1, OVER_LIMIT: 2 }
const SERVING = 1
const NOT_SERVING = 2

/** Loads the protos under `dir` (the service's own copies; google/protobuf/* are protobufjs's bundled ones). */
export function createRlsCodec(dir: string): RlsCodec {
  const root = new protobuf.Root()
  root.resolvePath = (_origin, target) => dir + target
  root.loadSync(['envoy/service/ratelimit/v3/rls.proto', 'grpc/health/v1/health.proto'], { keepCase: true })
  root.resolveAll()
  const request = root.lookupType('envoy.service.ratelimit.v3.RateLimitRequest')
  const response = root.lookupType('envoy.service.ratelimit.v3.RateLimitResponse')
  const healthRequest = root.lookupType('grpc.health.v1.HealthCheckRequest')
  const healthResponse = root.lookupType('grpc.health.v1.HealthCheckResponse')
  return {
    decodeRequest(bytes) {
      const message = request.decode(bytes) as unknown as GrpcRateLimitRequest
      for (const descriptor of message.descriptors) {
        const hits = descriptor.hits_addend
        // A uint64 decodes as a Long; proto-loader's `longs: Number` made it a number, and so does this.
        if (hits !== null && typeof hits.value !== 'number')
          descriptor.hits_addend = { value: protobuf.util.LongBits.from(hits.value as protobuf.Long).toNumber(true) }
      }
      return message
    },
    encodeResponse(answer) {
      return response.encode(toWire(answer)).finish()
    },
    decodeHealthRequest(bytes) {
      return (healthRequest.decode(bytes) as unknown as { service: string }).service
    },
    encodeHealthResponse(serving) {
      return healthResponse.encode({ status: serving ? SERVING : NOT_SERVING }).finish()
    },
  }
}

/**
 * The answer as protobufjs writes it: enums as numbers, and the metadata as a Struct (camelCase, as protobufjs's
 * bundled well-known types).
 */
function toWire(answer: RlsResponse): Record<string, unknown> {
  const statuses = new Array(answer.statuses.length)
  for (let i = 0; i < statuses.length; i++) {
    const status = answer.statuses[i]
    const limit = status.current_limit
    statuses[i] = {
      code: CODES[status.code],
      current_limit:
        limit === null ? null : { name: limit.name, requests_per_unit: limit.requests_per_unit, unit: UNIT_NUMBER[limit.unit] },
      limit_remaining: status.limit_remaining,
      duration_until_reset: status.duration_until_reset,
    }
  }
  return {
    overall_code: CODES[answer.overall_code],
    statuses,
    response_headers_to_add: answer.response_headers_to_add,
    dynamic_metadata: answer.dynamic_metadata === null ? null : toStruct(answer.dynamic_metadata),
  }
}

function toStruct(object: Readonly<Record<string, unknown>>): { fields: Record<string, unknown> } {
  const fields: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(object)) fields[key] = toValue(value)
  return { fields }
}

function toValue(value: unknown): Record<string, unknown> {
  if (value === null || value === undefined) return { nullValue: 0 }
  if (typeof value === 'number') return { numberValue: value }
  if (typeof value === 'boolean') return { boolValue: value }
  if (typeof value === 'string') return { stringValue: value }
  if (Array.isArray(value)) return { listValue: { values: value.map(toValue) } }
  if (value instanceof Date) return { stringValue: value.toISOString() }
  if (typeof value === 'object') return { structValue: toStruct(value as Record<string, unknown>) }
  return { stringValue: String(value) }
}
