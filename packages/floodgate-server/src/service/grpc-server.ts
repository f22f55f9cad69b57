// The Envoy RLS v3 gRPC server (`RateLimitService/ShouldRateLimit`) and the standard gRPC health service, on node:http2.

import { existsSync } from 'node:fs'
import http2 from 'node:http2'
import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net'
import { fileURLToPath } from 'node:url'
import * as grpc from '@grpc/grpc-js'
import * as protoLoader from '@grpc/proto-loader'
import type { Logger } from 'pino'
import { FloodgateError } from 'floodgate'
import type { Decider } from './decide.js'
import type { StoreErrorHandling } from './decide.js'
import { createRlsCodec, type RlsCodec } from './envoy-codec.js'
import { fromGrpcRequest } from './envoy-request.js'
import { limitConnectionAge } from './grpc-connection-age.js'
import { GrpcConnections, type GrpcConnectionLimits, type ShedCounts } from './grpc-connections.js'
import { awaitPreface } from './grpc-preface.js'
import { createSecureGrpcServer, type GrpcTlsSettings } from './grpc-tls.js'
import { toRlsResponse, type ResponseHeaderNames } from './envoy-response.js'
import { readUnaryCall, sendMessage, sendStatus, STATUS, type GrpcStatus } from './grpc-unary.js'
import type { ServiceMetrics } from './metrics.js'
import type { Tracing } from './tracing.js'
import { LISTEN_BACKLOG, SYSTEM_TIMERS, type ShutdownTimers } from './shutdown.js'

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

/** Loads the RLS and health services for grpc-js clients (tests, benchmarks, callers of the service). */
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
  /** A span per ShouldRateLimit (--tracing); undefined traces nothing. */
  tracing?: Tracing
  /** Milliseconds since the epoch (default Date.now); tests inject one. */
  clock?: () => number
  /** The connection bounds (--grpc-max-connections, --grpc-idle-timeout, …), and the calls at once per connection. */
  limits: GrpcConnectionLimits & { maxConcurrentStreams: number }
  /**
   * Plaintext: a connection's session waits for the SETTINGS frame after the preface's magic (default
   * true); false makes it on the magic alone (--no-grpc-await-settings).
   */
  awaitSettings?: boolean
  /** Serve over TLS (mTLS with a client CA); undefined: plaintext h2c. */
  tls?: GrpcTlsSettings
  /** GOAWAY to each connection after this age (±10%), cut after the grace; undefined: connections have no age limit. */
  connectionAge?: { maxAgeMs: number; graceMs: number; random?: () => number }
  /** Timers of the connection age (tests inject their own). */
  timers?: ShutdownTimers
}

/** Where the gRPC server listens: a TCP address, or a unix socket's path (upstream's GRPC_UDS). */
export type GrpcListenAddress = { host: string; port: number } | { path: string }

export interface FloodgateGrpcServer {
  /**
   * Binds and starts serving; resolves with the bound port (0 on a unix socket), or rejects with node's
   * listen error marked `server: 'gRPC'`.
   */
  listen(address: GrpcListenAddress): Promise<number>
  /**
   * Stops accepting calls (GOAWAY), lets running calls finish for up to `timeoutMs`, then cuts the
   * rest; resolves as soon as the running calls are done, or at the deadline.
   */
  close(timeoutMs: number, timers?: ShutdownTimers): Promise<void>
  /** Connections open now, and how many the server closed and why (for /metrics). */
  connections(): { open: number; shed: Readonly<ShedCounts> }
}

/**
 * Service names the health service answers for: "" (the whole server), "ratelimit" (the name
 * envoyproxy/ratelimit registers, which deployments' health checks ask for) and the RLS service.
 */
const HEALTH_SERVICES: ReadonlySet<string> = new Set(['', 'ratelimit', 'envoy.service.ratelimit.v3.RateLimitService'])

const SHOULD_RATE_LIMIT = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit'
const HEALTH_CHECK = '/grpc.health.v1.Health/Check'

/** One unary method: its request bytes in, its answer bytes (or a status) out. */
type UnaryHandler = (message: Uint8Array, headers: http2.IncomingHttpHeaders) => Promise<Uint8Array> | Uint8Array

/**
 * Builds the gRPC server; nothing listens until `listen`. It speaks gRPC on node:http2 itself rather
 * than through grpc-js's server: the same wire protocol (status trailers, trailers-only errors,
 * grpc-timeout deadlines, size caps before decoding, gzip/deflate requests) at a fraction of the
 * per-call cost, since a unary call needs none of grpc-js's interceptor and stream machinery.
 */
export function createGrpcServer(options: GrpcServerOptions): FloodgateGrpcServer {
  const codec = createRlsCodec(protoDir())
  const handlers = new Map<string, UnaryHandler>([
    [SHOULD_RATE_LIMIT, shouldRateLimitHandler(options, codec)],
    [HEALTH_CHECK, healthCheckHandler(options.isReady, codec)],
  ])
  // The cap on calls at once is advertised in SETTINGS (clients queue past it) and enforced by nghttp2,
  // which refuses a stream over it (REFUSED_STREAM, which gRPC clients retry).
  const http2Options = { settings: { maxConcurrentStreams: options.limits.maxConcurrentStreams } }
  const secure = options.tls === undefined ? undefined : createSecureGrpcServer(options.tls, http2Options, options.logger)
  const server = secure?.server ?? http2.createServer(http2Options)
  // A session is made on the TLS socket once its handshake is done, else on the TCP socket itself.
  const connectionEvent = secure === undefined ? 'connection' : 'secureConnection'
  const connections = new GrpcConnections(server, options.limits, connectionEvent)
  if (options.connectionAge !== undefined) limitConnectionAge(server, { ...options.connectionAge, timers: options.timers ?? SYSTEM_TIMERS })
  // Plaintext: a net server accepts, and a socket reaches http2 only once it sent the preface
  // (grpc-preface.ts); TLS: the TLS server listens itself (the preface comes inside TLS).
  const listener: NetServer = secure?.server ?? createNetServer()
  const sessions = new Set<http2.ServerHttp2Session>()
  // Sockets too: a connection that never sent the HTTP/2 preface has no session to close.
  const sockets = new Set<Socket>()
  listener.on(connectionEvent, (socket: Socket) => {
    sockets.add(socket)
    socket.once('close', () => sockets.delete(socket))
    if (secure !== undefined) return
    connections.accepted(socket)
    awaitPreface(socket, (opened) => server.emit('connection', opened), options.awaitSettings ?? true)
  })
  server.on('session', (session) => {
    sessions.add(session)
    // `session.socket` is a proxy, never equal to the socket the listener saw; a property set on it
    // lands on that socket, so the mark is how close() tells a socket with a session from one without.
    ;(session.socket as Socket & { [HAS_SESSION]?: boolean })[HAS_SESSION] = true
    session.once('close', () => sessions.delete(session))
    session.on('error', () => {})
  })
  server.on('stream', (stream, headers) => {
    // A stream error (a reset, a broken socket) ends the call; the session reports nothing further.
    stream.on('error', () => {})
    connections.streamStarted(stream)
    const contentType = headers['content-type']
    if (typeof contentType !== 'string' || !contentType.startsWith('application/grpc')) {
      // Not gRPC at all, as grpc-js answers it: plain HTTP 415.
      stream.respond({ ':status': 415 }, { endStream: true })
      return
    }
    const path = headers[':path'] ?? ''
    const handler = handlers.get(path)
    if (handler === undefined) {
      sendStatus(stream, { code: STATUS.UNIMPLEMENTED, details: `The server does not implement the method ${path}` })
      return
    }
    readUnaryCall(stream, headers, options.maxMessageBytes, path, (message) => answer(stream, headers, handler, message, options.logger))
  })

  return {
    listen(address) {
      return new Promise((resolve, reject) => {
        const failed = (error: Error) => reject(Object.assign(error, { server: 'gRPC' }))
        listener.once('error', failed)
        const listening = () => {
          listener.off('error', failed)
          resolve('path' in address ? 0 : (listener.address() as { port: number }).port)
        }
        if ('path' in address) listener.listen(address.path, LISTEN_BACKLOG, listening)
        else listener.listen(address.port, address.host, LISTEN_BACKLOG, listening)
      })
    },
    connections: () => ({ open: connections.size, shed: connections.shed }),
    close(timeoutMs, timers = SYSTEM_TIMERS) {
      connections.stop()
      secure?.close()
      return new Promise((resolve) => {
        if (!listener.listening) {
          resolve()
          return
        }
        const force = timers.setTimeout(() => {
          for (const session of sessions) session.destroy()
          for (const socket of sockets) socket.destroy()
          resolve()
        }, timeoutMs)
        // The listener's callback waits for every socket it accepted, sessions' and held ones' alike.
        listener.close(() => {
          timers.clearTimeout(force)
          resolve()
        })
        // GOAWAY: no new calls; each session ends once its running calls are answered.
        for (const session of sessions) session.close()
        for (const socket of sockets) if (!hasSession(socket)) socket.destroy()
      })
    },
  }
}

const HAS_SESSION = Symbol('floodgate.grpcSession')

function hasSession(socket: Socket): boolean {
  return (socket as Socket & { [HAS_SESSION]?: boolean })[HAS_SESSION] === true
}

/** Runs the handler on a whole request message and sends its answer, or the status its error maps to. */
function answer(
  stream: http2.ServerHttp2Stream,
  headers: http2.IncomingHttpHeaders,
  handler: UnaryHandler,
  message: Uint8Array,
  logger: Logger,
): void {
  let result: Promise<Uint8Array> | Uint8Array
  try {
    result = handler(message, headers)
  } catch (error) {
    sendStatus(stream, toGrpcStatus(error, logger))
    return
  }
  if (result instanceof Uint8Array) sendMessage(stream, result)
  else
    result.then(
      (bytes) => sendMessage(stream, bytes),
      (error: unknown) => sendStatus(stream, toGrpcStatus(error, logger)),
    )
}

/** A request that does not decode; as grpc-js, INTERNAL. */
class UndecodableRequest extends Error {}

function shouldRateLimitHandler(options: GrpcServerOptions, codec: RlsCodec): UnaryHandler {
  const clock = options.clock ?? Date.now
  const { tracing, metrics } = options
  // A bad request throws before deciding: as a rejection, so the call's stats and span see it end.
  const handle = (request: ReturnType<RlsCodec['decodeRequest']>, started: number): Promise<Uint8Array> => {
    let input: ReturnType<typeof fromGrpcRequest>
    try {
      input = fromGrpcRequest(request)
    } catch (error) {
      return Promise.reject(error)
    }
    return options.decider.decide(input, { storeError: options.storeError }).then((result) => {
      metrics.observeLatency('grpc', (performance.now() - started) / 1000)
      const response = toRlsResponse(result, {
        now: clock(),
        headers: options.responseHeaders,
        dynamicMetadataOf: options.dynamicMetadata ? input : undefined,
      })
      return codec.encodeResponse(response)
    })
  }
  return (message, headers) => {
    const started = performance.now()
    let request: ReturnType<RlsCodec['decodeRequest']>
    try {
      request = codec.decodeRequest(message)
    } catch (error) {
      throw new UndecodableRequest((error as Error).message)
    }
    // Upstream's ratelimit_server.ShouldRateLimit.* stats count every decoded call, answered or failed.
    const called = () => metrics.recordGrpcCall(performance.now() - started)
    const answered =
      tracing === undefined
        ? handle(request, started)
        : tracing.shouldRateLimit(
            headers,
            () => domainOf(request),
            () => handle(request, started),
          )
    answered.then(called, called)
    return answered
  }
}

/** The request's domain, for the span (the codec's request type is not narrowed here). */
function domainOf(request: unknown): string | undefined {
  const domain = (request as { domain?: unknown } | null)?.domain
  return typeof domain === 'string' ? domain : undefined
}

function healthCheckHandler(isReady: () => boolean, codec: RlsCodec): UnaryHandler {
  return (message) => {
    let service
    try {
      service = codec.decodeHealthRequest(message)
    } catch (error) {
      throw new UndecodableRequest((error as Error).message)
    }
    if (!HEALTH_SERVICES.has(service)) throw new UnknownHealthService(service)
    return codec.encodeHealthResponse(isReady())
  }
}

class UnknownHealthService extends Error {
  constructor(service: string) {
    super(`unknown service ${JSON.stringify(service)}`)
  }
}

/** A user's bad request becomes INVALID_ARGUMENT with its reason; anything else is our fault: INTERNAL, logged. */
function toGrpcStatus(error: unknown, logger: Logger): GrpcStatus {
  if (error instanceof FloodgateError && error.code === 'INVALID_REQUEST') return { code: STATUS.INVALID_ARGUMENT, details: error.message }
  if (error instanceof FloodgateError && error.code === 'STORE_UNAVAILABLE') return { code: STATUS.UNAVAILABLE, details: error.message }
  if (error instanceof UnknownHealthService) return { code: STATUS.NOT_FOUND, details: error.message }
  if (error instanceof UndecodableRequest) return { code: STATUS.INTERNAL, details: 'Error deserializing request' }
  logger.error({ err: error }, 'gRPC call failed')
  return { code: STATUS.INTERNAL, details: 'internal error deciding the request' }
}
