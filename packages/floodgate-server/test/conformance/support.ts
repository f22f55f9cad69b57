// Conformance harness: an Envoy RLS client built from Envoy's official protos (the copy @grpc/grpc-js-xds
// ships, with its validate and udpa imports), the service on the memory store or a real redis-server, and /json.

import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import * as grpc from '@grpc/grpc-js'
import protobuf from 'protobufjs'
import { startRedis, type RedisProcess } from '../../../floodgate/test/support/redis-server.js'
import { rlsClients, startTestService, type TestService } from '../service/helpers.js'

const require = createRequire(import.meta.url)
const DEPS = join(dirname(require.resolve('@grpc/grpc-js-xds/package.json')), 'deps')
const INCLUDE_DIRS = [
  join(DEPS, 'envoy-api'),
  join(DEPS, 'xds'),
  join(DEPS, 'protoc-gen-validate'),
  join(DEPS, 'googleapis'),
  dirname(require.resolve('protobufjs/package.json')),
]

/**
 * Envoy's rls.proto and its imports, as published. That copy predates two fields the tests use,
 * which Envoy's current API has: `RateLimitDescriptor.hits_addend` (field 3, a UInt64Value) and
 * the `WEEK` unit (7) of both unit enums. They are added to the loaded definitions here, with
 * Envoy's numbers, and nothing else is changed.
 */
function loadOfficialRoot(): protobuf.Root {
  const root = new protobuf.Root()
  root.resolvePath = (_origin, target) => INCLUDE_DIRS.map((dir) => join(dir, target)).find(existsSync) ?? target
  root.loadSync('envoy/service/ratelimit/v3/rls.proto', { keepCase: true })
  const descriptor = root.lookupType('envoy.extensions.common.ratelimit.v3.RateLimitDescriptor')
  if (descriptor.fields.hits_addend === undefined) descriptor.add(new protobuf.Field('hits_addend', 3, 'google.protobuf.UInt64Value'))
  for (const name of ['envoy.type.v3.RateLimitUnit', 'envoy.service.ratelimit.v3.RateLimitResponse.RateLimit.Unit']) {
    const unit = root.lookupEnum(name)
    if (unit.values.WEEK === undefined) unit.add('WEEK', 7)
  }
  root.resolveAll()
  return root
}

const root = loadOfficialRoot()
const RequestType = root.lookupType('envoy.service.ratelimit.v3.RateLimitRequest')
const ResponseType = root.lookupType('envoy.service.ratelimit.v3.RateLimitResponse')

/** A descriptor as the tests write it. */
export interface TestDescriptor {
  entries: Record<string, string> | [string, string][]
  limit?: { requests_per_unit: number; unit: string }
  hits_addend?: number
}

export interface TestRequest {
  domain: string
  descriptors: TestDescriptor[]
  hits_addend?: number
}

/** A decoded RateLimitResponse: enums by name, 64-bit numbers as numbers, defaults filled. */
export interface OfficialResponse {
  overall_code: string
  statuses: {
    code: string
    current_limit: { name: string; requests_per_unit: number; unit: string } | null
    limit_remaining: number
    duration_until_reset: { seconds: number; nanos: number } | null
  }[]
  response_headers_to_add: { key: string; value: string }[]
  dynamic_metadata: { fields: Record<string, unknown> } | null
}

function toMessage(request: TestRequest): Record<string, unknown> {
  return {
    domain: request.domain,
    hits_addend: request.hits_addend ?? 0,
    descriptors: request.descriptors.map((d) => ({
      entries: (Array.isArray(d.entries) ? d.entries : Object.entries(d.entries)).map(([key, value]) => ({ key, value })),
      ...(d.limit ? { limit: d.limit } : {}),
      ...(d.hits_addend === undefined ? {} : { hits_addend: { value: d.hits_addend } }),
    })),
  }
}

/** The request encoded with the official definition: what Envoy puts on the wire. */
export function encodeRequest(request: TestRequest): Buffer {
  const message = RequestType.fromObject(toMessage(request))
  return Buffer.from(RequestType.encode(message).finish())
}

function decodeResponse(buffer: Buffer): OfficialResponse {
  const object = ResponseType.toObject(ResponseType.decode(buffer), {
    enums: String,
    longs: Number,
    defaults: true,
    arrays: true,
    oneofs: true,
  })
  for (const status of object.statuses as Record<string, unknown>[]) {
    status.current_limit ??= null
    status.duration_until_reset ??= null
    // `quota` is a newer part of the status that neither side uses here.
    if (status.quota == null) delete status.quota
  }
  object.dynamic_metadata ??= null
  return object as OfficialResponse
}

/** A ShouldRateLimit client speaking the official wire format. */
export class EnvoyClient {
  readonly #client: grpc.Client

  constructor(port: number) {
    this.#client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure())
  }

  shouldRateLimit(request: TestRequest): Promise<OfficialResponse> {
    return this.raw(encodeRequest(request)).then(decodeResponse)
  }

  /** Sends bytes as they are (for oversized and malformed messages). */
  raw(bytes: Buffer): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      this.#client.makeUnaryRequest(
        '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit',
        (body: Buffer) => body,
        (body: Buffer) => body,
        bytes,
        (error, response) => (error ? reject(error) : resolve(response as Buffer)),
      )
    })
  }

  close(): void {
    this.#client.close()
  }
}

/** POSTs (or sends with `method`) a body to `/json`; returns status, content type and text. */
export async function postJsonApi(
  httpUrl: string,
  body: unknown,
  method = 'POST',
): Promise<{ status: number; type: string; text: string; json: any }> {
  const response = await fetch(`${httpUrl}/json`, {
    method,
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  })
  const text = await response.text()
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  return { status: response.status, type: response.headers.get('content-type') ?? '', text, json }
}

export type StoreKind = 'memory' | 'redis'
export const STORES: readonly StoreKind[] = ['memory', 'redis']

/** A running service on one store, with an official client; `stop` ends both (and the redis-server). */
export interface Conformance {
  readonly service: TestService
  readonly client: EnvoyClient
  readonly health: ReturnType<typeof rlsClients>
  readonly redis: RedisProcess | undefined
  stop(): Promise<void>
}

/** Starts the service with `rules` on `store` (a fresh redis-server for `redis`), plus `args`. */
export async function startConformance(store: StoreKind, rules: string, args: string[] = []): Promise<Conformance> {
  const redis = store === 'redis' ? await startRedis() : undefined
  try {
    // A generous store deadline: on a busy machine a Redis answer may take longer than the 100ms
    // default, which the Envoy paths now report as UNAVAILABLE. Tests of the deadline pass their own
    // --store-timeout, which comes later and wins.
    const service = await startTestService(rules, [...(redis ? ['--redis', redis.url, '--store-timeout', '10s'] : []), ...args])
    if (redis) await storeReachable(service.httpUrl)
    const client = new EnvoyClient(service.grpcPort)
    const health = rlsClients(service.grpcPort)
    return {
      service,
      client,
      health,
      redis,
      async stop() {
        client.close()
        health.close()
        await service.stop()
        await redis?.stop()
      },
    }
  } catch (error) {
    await redis?.stop()
    throw error
  }
}

/**
 * Waits until /readyz reports the store reachable (the Redis client connects after the service
 * listens, as upstream's does before it reports healthy). Bounded by count, not by a clock.
 */
export async function storeReachable(httpUrl: string): Promise<void> {
  for (let attempt = 0; attempt < 200; attempt++) {
    // Public /readyz says only a status and a reason; `ready` means the store is reachable.
    const body = (await (await fetch(`${httpUrl}/readyz`)).json()) as { status?: string }
    if (body.status === 'ready') return
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
  throw new Error('the service never reached its Redis')
}

/** `unit - now % unit` seconds at `before` or at `after`: the answer was computed somewhere in between. */
export function resetSecondsBetween(unitSeconds: number, before: number, after: number): number[] {
  const at = (ms: number) => unitSeconds - (Math.floor(ms / 1000) % unitSeconds)
  return [...new Set([at(before), at(after)])]
}

/** A descriptor with one or more entries, in order. */
export const desc = (pairs: Record<string, string>, extra: Omit<TestDescriptor, 'entries'> = {}): TestDescriptor => ({
  entries: pairs,
  ...extra,
})

/** A unique value per call, so cases never share a counter. */
let sequence = 0
export const unique = (prefix: string) => `${prefix}-${process.pid}-${++sequence}`
