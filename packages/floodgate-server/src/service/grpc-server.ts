// The Envoy RLS v3 gRPC server (`RateLimitService/ShouldRateLimit`) and the standard gRPC health service.

import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import * as grpc from '@grpc/grpc-js'
import * as protoLoader from '@grpc/proto-loader'
import type { Logger } from 'pino'
import { FloodgateError } from 'floodgate'
import type { Decider } from './decide.js'
import type { StoreErrorHandling } from './decide.js'
import { fromGrpcRequest, type GrpcRateLimitRequest } from './envoy-request.js'
import { toGrpcResponse, toRlsResponse, type ResponseHeaderNames } from './envoy-response.js'
import type { ServiceMetrics } from './metrics.js'
import { SYSTEM_TIMERS, type ShutdownTimers } from './shutdown.js'

/** Options proto-loader reads the protos with: snake_case kept, enums by name, defaults filled, unset messages null. */
export const PROTO_LOADER_OPTIONS: protoLoader.Options = { keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true }

/**
 * The folder holding the .proto files, next to this module in `src/` and in `dist/` alike (the build
 * copies them, since tsc does not).
 */
export function protoDir(): string {
  const dir = fileURLToPath(new URL('./proto/', import.meta.url))
  if (existsSync(dir)) return dir
  throw new Error(`Floodgate's .proto files are missing from ${dir}: reinstall floodgate-server`)
}

/** Loads the RLS and health services, for the server and for clients (tests, benchmarks). */
export function loadRlsPackage(): grpc.GrpcObject {
  const definition = protoLoader.loadSync(['envoy/service/ratelimit/v3/rls.proto', 'grpc/health/v1/health.proto'], {
    ...PROTO_LOADER_OPTIONS,
    includeDirs: [protoDir()],
  })
  return grpc.loadPackageDefinition(definition)
}

export interface GrpcServerOptions {
  decider: Decider
  metrics: ServiceMetrics
  logger: Logger
  /** Whether to report SERVING on the health service. */
  isReady: () => boolean
  /** Add RateLimit-Limit/-Remaining/-Reset under these names to `response_headers_to_add`; undefined adds none. */
  responseHeaders: ResponseHeaderNames | undefined
  /** Upstream's RESPONSE_DYNAMIC_METADATA. */
  dynamicMetadata: boolean
  /** `error`: a decision the store could not make is a gRPC UNAVAILABLE, so Envoy's failure_mode_deny decides. */
  storeError: StoreErrorHandling
  /** Largest request message accepted, in bytes. */
  maxMessageBytes: number
  /** Milliseconds since the epoch (default Date.now); tests inject one. */
  clock?: () => number
}

export interface FloodgateGrpcServer {
  /** Binds and starts serving; resolves with the bound port. */
  listen(host: string, port: number): Promise<number>
  /**
   * Stops accepting calls (GOAWAY), lets running calls finish for up to `timeoutMs`, then cuts the
   * rest; resolves as soon as the running calls are done, or at the deadline.
   */
  close(timeoutMs: number, timers?: ShutdownTimers): Promise<void>
}

/**
 * Service names the health service answers for: "" (the whole server), "ratelimit" (the name
 * envoyproxy/ratelimit registers, which deployments' health checks ask for) and the RLS service.
 */
const HEALTH_SERVICES: ReadonlySet<string> = new Set(['', 'ratelimit', 'envoy.service.ratelimit.v3.RateLimitService'])

/** Builds the gRPC server; nothing listens until `listen`. */
export function createGrpcServer(options: GrpcServerOptions): FloodgateGrpcServer {
  const pkg = loadRlsPackage()
  // A request bigger than any real Envoy descriptor set is refused before it is decoded.
  const server = new grpc.Server({ 'grpc.max_receive_message_length': options.maxMessageBytes })
  server.addService(serviceOf(pkg, 'envoy.service.ratelimit.v3.RateLimitService'), {
    ShouldRateLimit: shouldRateLimitHandler(options),
  })
  server.addService(serviceOf(pkg, 'grpc.health.v1.Health'), { Check: healthCheckHandler(options.isReady) })

  return {
    listen(host, port) {
      return new Promise((resolve, reject) => {
        const address = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`
        server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound)))
      })
    },
    close(timeoutMs, timers = SYSTEM_TIMERS) {
      return new Promise((resolve) => {
        // forceShutdown returns once the server is down; tryShutdown's callback may then never come
        // (a connection that never sent the HTTP/2 preface keeps it waiting), so resolve here too.
        const force = timers.setTimeout(() => {
          server.forceShutdown()
          resolve()
        }, timeoutMs)
        server.tryShutdown(() => {
          timers.clearTimeout(force)
          resolve()
        })
      })
    },
  }
}

function serviceOf(pkg: grpc.GrpcObject, name: string): grpc.ServiceDefinition {
  let node: unknown = pkg
  for (const part of name.split('.')) node = (node as Record<string, unknown>)[part]
  return (node as grpc.ServiceClientConstructor).service
}

function shouldRateLimitHandler(options: GrpcServerOptions): grpc.handleUnaryCall<GrpcRateLimitRequest, ReturnType<typeof toGrpcResponse>> {
  const clock = options.clock ?? Date.now
  return (call, callback) => {
    const started = performance.now()
    let input
    try {
      input = fromGrpcRequest(call.request)
    } catch (error) {
      callback(toGrpcError(error, options.logger))
      return
    }
    options.decider.decide(input, { storeError: options.storeError }).then(
      (result) => {
        options.metrics.observeLatency('grpc', (performance.now() - started) / 1000)
        const response = toRlsResponse(result, {
          now: clock(),
          headers: options.responseHeaders,
          dynamicMetadataOf: options.dynamicMetadata ? input : undefined,
        })
        callback(null, toGrpcResponse(response))
      },
      (error: unknown) => callback(toGrpcError(error, options.logger)),
    )
  }
}

function healthCheckHandler(isReady: () => boolean): grpc.handleUnaryCall<{ service: string }, { status: string }> {
  return (call, callback) => {
    const service = call.request.service
    if (!HEALTH_SERVICES.has(service)) {
      callback({ code: grpc.status.NOT_FOUND, details: `unknown service ${JSON.stringify(service)}` })
      return
    }
    callback(null, { status: isReady() ? 'SERVING' : 'NOT_SERVING' })
  }
}

/** A user's bad request becomes INVALID_ARGUMENT with its reason; anything else is our fault: INTERNAL, logged. */
function toGrpcError(error: unknown, logger: Logger): Partial<grpc.StatusObject> {
  if (error instanceof FloodgateError && error.code === 'INVALID_REQUEST') {
    return { code: grpc.status.INVALID_ARGUMENT, details: error.message }
  }
  if (error instanceof FloodgateError && error.code === 'STORE_UNAVAILABLE') {
    return { code: grpc.status.UNAVAILABLE, details: error.message }
  }
  logger.error({ err: error }, 'ShouldRateLimit failed')
  return { code: grpc.status.INTERNAL, details: 'internal error deciding the request' }
}
