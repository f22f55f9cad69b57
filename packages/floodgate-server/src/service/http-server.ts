// The HTTP side of the service (Fastify): /v1/check, Envoy's /json and /healthcheck, health probes, /metrics, /admin.

import type { Socket } from 'node:net'
import Fastify, { LogController, type FastifyError, type FastifyInstance, type FastifyReply } from 'fastify'
import type { Logger } from 'pino'
import { FloodgateError, formatDuration } from 'floodgate'
import type { RuleSetDescription } from 'floodgate/rules'
import type { DashboardCollector } from 'floodgate/dashboard'
import { registerAdminRoutes } from './admin.js'
import { registerDashboardRoutes } from './dashboard.js'
import { CHECK_RESPONSE_SCHEMA, checkHeaders, parseCheckRequest, toCheckResponse } from './check-api.js'
import type { DecideInput, DecideResult, Decider, StoreErrorHandling } from './decide.js'
import { fromProtoJson } from './envoy-request.js'
import { toProtoJson, toRlsResponse, type ResponseHeaderNames } from './envoy-response.js'
import type { ServiceMetrics } from './metrics.js'
import type { Tracing } from './tracing.js'

/** The service's health: `/readyz` shows a status and a reason code from it, `/admin/health` all of it. */
export interface HealthReport {
  /** Able to answer decisions (false while starting or shutting down). */
  ready: boolean
  /** The store answers; when false the limiter is deciding in its failure mode. */
  storeReachable: boolean
  /**
   * Shards of the store (memcached servers, Redis Cluster masters, as `host:port`) whose breaker is
   * open: their keys are decided in the failure mode, every other key by the store.
   */
  shardsUnreachable?: readonly string[]
  /** The configured failure mode (`open`, `closed`, `local`). */
  onStoreError: string
  /** Files of the active rules snapshot. */
  rules: string[]
  /** False only while an xDS rules source waits for its first config (nothing is limited until then). */
  rulesLoaded?: boolean
  /** Issues of the latest failed reload (the previous rules keep serving); absent when the files are valid. */
  rulesError?: string[]
  /**
   * Peer regions not heard from lately (partitioned or down); absent without regions. This region
   * keeps deciding (within the bounds of docs/regions.md), so it is degraded, never down.
   */
  peersUnreachable?: readonly string[]
}

export interface HttpServerOptions {
  decider: Decider
  metrics: ServiceMetrics
  logger: Logger
  /** Largest request body; bigger ones get 413. */
  bodyLimitBytes: number
  /** A request's head and body must have arrived within this; else 408 and the socket closes (slow clients). */
  requestTimeoutMs: number
  /** A socket with no traffic for this long while a request is open closes (a client that stops reading). */
  connectionTimeoutMs: number
  /** An idle keep-alive socket closes after this. */
  keepAliveTimeoutMs: number
  /** Enables /admin with this bearer token; undefined leaves /admin unrouted (404). */
  adminToken: string | undefined
  describeRules: () => RuleSetDescription
  health: () => HealthReport
  /** Whether `/healthcheck` answers OK (default: ready); false gives 500, as upstream's failed health. */
  serving?: () => boolean
  /** The dashboard's figures: served at /dashboard behind the admin token (when one is set). */
  dashboard?: DashboardCollector
  /** Envoy's `/json`: its answers as the gRPC server's (the same options). */
  envoy: {
    /** RateLimit-* header names for responseHeadersToAdd; undefined adds none. */
    responseHeaders: ResponseHeaderNames | undefined
    dynamicMetadata: boolean
    /** `error`: a decision the store could not make is an error answer (upstream: 400), not the failure mode's. */
    storeError: StoreErrorHandling
    /** Milliseconds since the epoch (default Date.now). */
    clock?: () => number
  }
  /** `/v1/check`: what a decision the store could not make becomes (`answer`: the failure mode's). */
  checkStoreError: StoreErrorHandling
  /** A span per `/json` and `/v1/check` request (--tracing); undefined traces nothing. */
  tracing?: Tracing
}

/** Why the service is (not) ready, as `/readyz` says it: a status and one reason code. */
export type ReadinessReason =
  | 'ok'
  | 'shutting_down'
  | 'store_unreachable'
  | 'shard_unreachable'
  | 'peer_unreachable'
  | 'rules_not_loaded'
  | 'rules_reload_failed'

/**
 * `ready` (rules loaded, store reachable), `degraded` (the store is unreachable and decisions follow
 * the failure mode, or a peer region is unreachable and this one decides on what it last heard) or
 * `not_ready` (starting or shutting down), and the reason: the most severe of shutting down, store
 * unreachable, peer unreachable, and a failed reload (the previous rules keep serving).
 */
export function readiness(health: HealthReport): { status: 'ready' | 'degraded' | 'not_ready'; reason: ReadinessReason } {
  if (!health.ready) return { status: 'not_ready', reason: 'shutting_down' }
  if (health.rulesLoaded === false) return { status: 'degraded', reason: 'rules_not_loaded' }
  if (!health.storeReachable) return { status: 'degraded', reason: 'store_unreachable' }
  if (health.shardsUnreachable !== undefined && health.shardsUnreachable.length > 0)
    return { status: 'degraded', reason: 'shard_unreachable' }
  if (health.peersUnreachable !== undefined && health.peersUnreachable.length > 0) return { status: 'degraded', reason: 'peer_unreachable' }
  return { status: 'ready', reason: health.rulesError === undefined ? 'ok' : 'rules_reload_failed' }
}

/** Builds the Fastify app with every route; the caller listens and closes it. */
export function createHttpServer(options: HttpServerOptions): FastifyInstance {
  const app = Fastify({
    loggerInstance: options.logger,
    // One log line per decision would drown the log (and cost throughput): errors are logged instead.
    logController: new LogController({ disableRequestLogging: true }),
    // No pino child per request (each is an allocation on every request): with request logging off, a request's only
    // line is the error handler's, which carries the request id itself.
    childLoggerFactory: (logger) => logger,
    bodyLimit: options.bodyLimitBytes,
    requestTimeout: options.requestTimeoutMs,
    connectionTimeout: options.connectionTimeoutMs,
    keepAliveTimeout: options.keepAliveTimeoutMs,
    http: {
      // The head must arrive in time too (a slow-headers client), and Node checks both deadlines
      // every connectionsCheckingInterval (30 s by default, far coarser than the timeout itself).
      headersTimeout: options.requestTimeoutMs,
      requestTimeout: options.requestTimeoutMs,
      connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(options.requestTimeoutMs / 4))),
    },
    // While draining, requests already on their way are decided (with Connection: close) rather
    // than turned away with 503: the limiter stays open until the last of them is answered.
    return503OnClosing: false,
    clientErrorHandler: (error: Error & { code?: string }, socket: Socket) => answerClientError(error, socket, options.requestTimeoutMs),
  }) as unknown as FastifyInstance
  // The connection cap (--max-connections) is kept by the ConnectionTracker, which sheds idle sockets.
  // Any body is read as JSON, whatever its content type: Envoy's /json is often called without a
  // JSON one (curl -d), and fetch sends a string body as text/plain. Fastify's own text/plain
  // parser would hand the routes a bare string, so it goes, and the catch-all below reads it.
  app.removeContentTypeParser('text/plain')
  app.addContentTypeParser('*', { parseAs: 'string' }, (_request, body, done) => {
    try {
      done(null, JSON.parse(body as string))
    } catch (error) {
      done(new FloodgateError('INVALID_REQUEST', `body: not valid JSON (${(error as Error).message})`), undefined)
    }
  })

  app.setErrorHandler((error: FastifyError | FloodgateError, request, reply) => {
    if (error instanceof FloodgateError && (error.code === 'INVALID_REQUEST' || error.code === 'INVALID_POLICY')) {
      return reply.code(400).send({ error: 'bad_request', message: error.message })
    }
    const status = (error as FastifyError).statusCode
    if (status !== undefined && status >= 400 && status < 500) {
      return reply.code(status).send({ error: errorName(status), message: clientMessage(error as FastifyError) })
    }
    request.log.error({ err: error, url: request.url, reqId: request.id }, 'request failed')
    return reply.code(500).send({ error: 'internal', message: 'internal error; see the service log' })
  })
  app.setNotFoundHandler((request, reply) =>
    reply.code(404).send({ error: 'not_found', message: `no route ${request.method} ${request.url.split('?')[0]}` }),
  )

  // The decision routes are plain functions that send once the decision is in, not async ones:
  // an async handler must `return reply`, which Fastify then awaits as a thenable (an extra
  // promise job and end-of-stream listeners on every response). A throw while parsing reaches the
  // error handler through Fastify's own try/catch; anything later through `reply.send(error)`.
  const sendCheck = (reply: FastifyReply, result: DecideResult) => {
    try {
      const headers = checkHeaders(result, Date.now())
      for (let i = 0; i < headers.length; i++) reply.header(storedName(headers[i][0]), headers[i][1])
      reply.code(result.allowed ? 200 : 429).send(toCheckResponse(result))
    } catch (error) {
      reply.send(error)
    }
  }
  const envoy = options.envoy
  const clock = envoy.clock ?? Date.now
  const sendRls = (reply: FastifyReply, input: DecideInput, result: DecideResult, started: number) => {
    try {
      options.metrics.observeLatency('http', (performance.now() - started) / 1000)
      const response = toRlsResponse(result, {
        now: clock(),
        headers: envoy.responseHeaders,
        dynamicMetadataOf: envoy.dynamicMetadata ? input : undefined,
      })
      reply.code(result.allowed ? 200 : 429).send(toProtoJson(response))
    } catch (error) {
      reply.send(error)
    }
  }
  const checkSchema = { response: { 200: CHECK_RESPONSE_SCHEMA, 429: CHECK_RESPONSE_SCHEMA } }
  const checkOptions = { storeError: options.checkStoreError }
  const tracing = options.tracing
  app.post('/v1/check', { schema: checkSchema }, (request, reply) => {
    const started = performance.now()
    // Untraced, the call stays as it was: the span and its closures cost only a traced request.
    const decided =
      tracing === undefined
        ? options.decider.decide(parseCheckRequest(request.body), checkOptions)
        : tracing.httpDecision(
            '/v1/check',
            'POST',
            request.headers,
            () => domainOf(request.body),
            () => options.decider.decide(parseCheckRequest(request.body), checkOptions),
          )
    decided.then(
      (result) => {
        options.metrics.observeLatency('http', (performance.now() - started) / 1000)
        // Sent at once, not deferred to the check phase: deferred, every request of a read burst
        // stays alive until then, and the young collections that meet them promote them all.
        sendCheck(reply, result)
      },
      (error: unknown) => reply.send(error),
    )
  })
  // As envoyproxy/ratelimit: any method; a body that is not a RateLimitRequest, a request the
  // service refuses, or a store that did not answer: 400 with Go's plain `Bad Request` body.
  // Our own faults stay 500s (logged by the app's handler).
  app.route({
    method: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'],
    url: '/json',
    errorHandler: (error, request, reply) => {
      const status = (error as FastifyError).statusCode
      const userError =
        error instanceof FloodgateError
          ? error.code === 'INVALID_REQUEST' || error.code === 'STORE_UNAVAILABLE'
          : status !== undefined && status >= 400 && status < 500
      if (!userError) {
        request.log.error({ err: error, url: request.url, reqId: request.id }, 'request failed')
        return reply.code(500).type('text/plain; charset=utf-8').send('Internal Server Error\n')
      }
      const code = status === 413 ? 413 : 400
      // The body is upstream's, word for word; the reason goes in a header for people and logs.
      reply.header('x-floodgate-reason', headerSafe(error.message))
      return reply
        .code(code)
        .header('x-content-type-options', 'nosniff')
        .type('text/plain; charset=utf-8')
        .send(code === 413 ? 'Request Entity Too Large\n' : 'Bad Request\n')
    },
    handler: (request, reply) => {
      const started = performance.now()
      // Upstream reads the body as JSON whatever its content type: so does the catch-all parser.
      if (tracing === undefined) {
        const input = fromProtoJson(request.body)
        options.decider.decide(input, { storeError: envoy.storeError }).then(
          (result) => sendRls(reply, input, result, started),
          (error: unknown) => reply.send(error),
        )
        return
      }
      // Traced, the body is read inside the span: a request refused as unreadable is traced as failed.
      let input: DecideInput
      const decide = () => {
        input = fromProtoJson(request.body)
        return options.decider.decide(input, { storeError: envoy.storeError })
      }
      tracing
        .httpDecision('/json', request.method, request.headers, () => domainOf(request.body), decide)
        .then(
          (result) => sendRls(reply, input, result, started),
          (error: unknown) => reply.send(error),
        )
    },
  })

  // As envoyproxy/ratelimit: plain "OK" when healthy, 500 with no body otherwise.
  const serving = options.serving ?? (() => options.health().ready)
  app.get('/healthcheck', async (_request, reply) =>
    serving() ? reply.type('text/plain; charset=utf-8').send('OK') : reply.code(500).send(''),
  )
  app.get('/healthz', async () => ({ status: 'alive' }))
  // Public, so it says only ready or not and why, as a code: rule file paths, the failure mode and
  // reload errors are internals, shown at GET /admin/health behind the admin token.
  app.get('/readyz', async (_request, reply) => {
    const health = options.health()
    const { status, reason } = readiness(health)
    // Which shards fail is what an operator acts on first; their addresses are the store's, as the metrics show.
    if (reason === 'shard_unreachable') return reply.code(200).send({ status, reason, shards: health.shardsUnreachable })
    return reply.code(health.ready ? 200 : 503).send({ status, reason })
  })

  app.get('/metrics', async (_request, reply) => {
    const { contentType, body } = await options.metrics.expose()
    return reply.type(contentType).send(body)
  })

  if (options.adminToken !== undefined) {
    registerAdminRoutes(app, {
      token: options.adminToken,
      decider: options.decider,
      describeRules: options.describeRules,
      health: options.health,
    })
    if (options.dashboard !== undefined) registerDashboardRoutes(app, options.dashboard, options.adminToken)
  }
  return app
}

/** A request body's domain, for its span (the body is not checked yet when the span starts). */
function domainOf(body: unknown): string | undefined {
  const domain = (body as { domain?: unknown } | null | undefined)?.domain
  return typeof domain === 'string' ? domain : undefined
}

/** Header names as Fastify keeps them, by the names given (a handful: the rate-limit fields). */
const storedNames = new Map<string, string>()

/**
 * A header name in lower case, as Fastify keeps it: Fastify lower-cases every name it is given, and
 * a name already in lower case is kept as it is, with no copy to make (and intern) on every answer.
 */
function storedName(name: string): string {
  let stored = storedNames.get(name)
  if (stored === undefined) {
    stored = name.toLowerCase()
    storedNames.set(name, stored)
  }
  return stored
}

/**
 * What a client that broke HTTP gets before its socket closes (Fastify's default, in this API's
 * error format, with a reason): 408 for a request slower than the timeout, 431 for a head too
 * large, 400 for anything unparsable.
 */
function answerClientError(error: Error & { code?: string }, socket: Socket, requestTimeoutMs: number): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return
  let status = 400
  let body: { error: string; message: string } = {
    error: 'bad_request',
    message: `not a valid HTTP request (${error.code ?? error.message})`,
  }
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    status = 408
    body = {
      error: 'request_timeout',
      message: `the request did not arrive within ${formatDuration(requestTimeoutMs)}; send its head and body without pausing`,
    }
  } else if (error.code === 'HPE_HEADER_OVERFLOW') {
    status = 431
    body = { error: 'headers_too_large', message: 'the request head is larger than the server accepts; send fewer or shorter headers' }
  }
  if (socket.writable) {
    const text = JSON.stringify(body)
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_TEXT[status]}\r\nConnection: close\r\nContent-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`,
    )
  }
  // Closed once the answer is flushed (a client that never reads is cut by the connection timeout).
  socket.destroySoon()
}

const STATUS_TEXT: Record<number, string> = { 400: 'Bad Request', 408: 'Request Timeout', 431: 'Request Header Fields Too Large' }

/** A message as a header value: printable ASCII on one line, at most 512 characters. */
function headerSafe(message: string): string {
  return message.replace(/[^\x20-\x7e]+/g, ' ').slice(0, 512)
}

function errorName(status: number): string {
  if (status === 413) return 'payload_too_large'
  if (status === 415) return 'unsupported_media_type'
  if (status === 404) return 'not_found'
  return 'bad_request'
}

function clientMessage(error: FastifyError): string {
  if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return `${error.message}; send a smaller body`
  if (error.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || error.name === 'SyntaxError') return `body: not valid JSON (${error.message})`
  return error.message
}
