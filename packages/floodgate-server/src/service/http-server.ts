// The HTTP side of the service (Fastify): /v1/check, Envoy's /json and /healthcheck, health probes, /metrics, /admin.

import Fastify, { LogController, type FastifyError, type FastifyInstance, type FastifyReply } from 'fastify'
import type { Logger } from 'pino'
import { FloodgateError } from 'floodgate'
import type { RuleSetDescription } from 'floodgate/rules'
import { registerAdminRoutes } from './admin.js'
import { CHECK_RESPONSE_SCHEMA, checkHeaders, parseCheckRequest, toCheckResponse } from './check-api.js'
import type { DecideInput, DecideResult, Decider, StoreErrorHandling } from './decide.js'
import { fromProtoJson } from './envoy-request.js'
import { toProtoJson, toRlsResponse, type ResponseHeaderNames } from './envoy-response.js'
import type { ServiceMetrics } from './metrics.js'

/** What `/readyz` reports. */
export interface HealthReport {
  /** Able to answer decisions (false while starting or shutting down). */
  ready: boolean
  /** The store answers; when false the limiter is deciding in its failure mode. */
  storeReachable: boolean
  /** The configured failure mode (`open`, `closed`, `local`). */
  onStoreError: string
  /** Files of the active rules snapshot. */
  rules: string[]
  /** Issues of the latest failed reload (the previous rules keep serving); absent when the files are valid. */
  rulesError?: string[]
}

export interface HttpServerOptions {
  decider: Decider
  metrics: ServiceMetrics
  logger: Logger
  /** Largest request body; bigger ones get 413. */
  bodyLimitBytes: number
  /** Enables /admin with this bearer token; undefined leaves /admin unrouted (404). */
  adminToken: string | undefined
  describeRules: () => RuleSetDescription
  health: () => HealthReport
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
}

/** Builds the Fastify app with every route; the caller listens and closes it. */
export function createHttpServer(options: HttpServerOptions): FastifyInstance {
  const app = Fastify({
    loggerInstance: options.logger,
    // One log line per decision would drown the log (and cost throughput): errors are logged instead.
    logController: new LogController({ disableRequestLogging: true }),
    // No pino child per request (about 0.3 µs each): with request logging off, a request's only
    // line is the error handler's, which carries the request id itself.
    childLoggerFactory: (logger) => logger,
    bodyLimit: options.bodyLimitBytes,
    return503OnClosing: true,
  }) as unknown as FastifyInstance
  // Envoy's /json is often called without a JSON content type (curl -d): read any body as JSON.
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
  const sendCheck = (reply: FastifyReply, result: DecideResult, started: number) => {
    try {
      options.metrics.observeLatency('http', (performance.now() - started) / 1000)
      const headers = checkHeaders(result, Date.now())
      for (let i = 0; i < headers.length; i++) reply.header(headers[i][0], headers[i][1])
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
      const response = toRlsResponse(result, { now: clock(), headers: envoy.responseHeaders, dynamicMetadataOf: envoy.dynamicMetadata ? input : undefined })
      reply.code(result.allowed ? 200 : 429).send(toProtoJson(response))
    } catch (error) {
      reply.send(error)
    }
  }
  const checkSchema = { response: { 200: CHECK_RESPONSE_SCHEMA, 429: CHECK_RESPONSE_SCHEMA } }
  app.post('/v1/check', { schema: checkSchema }, (request, reply) => {
    const started = performance.now()
    options.decider.decide(parseCheckRequest(request.body), { storeError: options.checkStoreError }).then(
      (result) => sendCheck(reply, result, started),
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
      const userError = error instanceof FloodgateError ? error.code === 'INVALID_REQUEST' || error.code === 'STORE_UNAVAILABLE' : status !== undefined && status >= 400 && status < 500
      if (!userError) {
        request.log.error({ err: error, url: request.url, reqId: request.id }, 'request failed')
        return reply.code(500).type('text/plain; charset=utf-8').send('Internal Server Error\n')
      }
      const code = status === 413 ? 413 : 400
      // The body is upstream's, word for word; the reason goes in a header for people and logs.
      reply.header('x-floodgate-reason', headerSafe(error.message))
      return reply.code(code).header('x-content-type-options', 'nosniff').type('text/plain; charset=utf-8').send(code === 413 ? 'Request Entity Too Large\n' : 'Bad Request\n')
    },
    handler: (request, reply) => {
      const started = performance.now()
      // Upstream reads the body as JSON whatever its content type; Fastify hands text/plain over unparsed.
      const input = fromProtoJson(typeof request.body === 'string' ? parseJsonText(request.body) : request.body)
      options.decider.decide(input, { storeError: envoy.storeError }).then(
        (result) => sendRls(reply, input, result, started),
        (error: unknown) => reply.send(error),
      )
    },
  })

  // As envoyproxy/ratelimit: plain "OK" when healthy, 500 with no body otherwise.
  app.get('/healthcheck', async (_request, reply) =>
    options.health().ready ? reply.type('text/plain; charset=utf-8').send('OK') : reply.code(500).send(''),
  )
  app.get('/healthz', async () => ({ status: 'alive' }))
  app.get('/readyz', async (_request, reply) => {
    const health = options.health()
    const status = !health.ready ? 'not_ready' : health.storeReachable ? 'ready' : 'degraded'
    const message =
      status === 'degraded'
        ? `store unreachable: deciding with onStoreError=${health.onStoreError} until it returns`
        : status === 'ready'
          ? 'rules loaded and store reachable'
          : 'not accepting decisions (starting or shutting down)'
    return reply.code(health.ready ? 200 : 503).send({ status, message, ...health })
  })

  app.get('/metrics', async (_request, reply) => {
    const { contentType, body } = await options.metrics.expose()
    return reply.type(contentType).send(body)
  })

  if (options.adminToken !== undefined) {
    registerAdminRoutes(app, { token: options.adminToken, decider: options.decider, describeRules: options.describeRules })
  }
  return app
}

/** A message as a header value: printable ASCII on one line, at most 512 characters. */
function headerSafe(message: string): string {
  return message.replace(/[^\x20-\x7e]+/g, ' ').slice(0, 512)
}

function parseJsonText(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch (error) {
    throw new FloodgateError('INVALID_REQUEST', `body: not valid JSON (${(error as Error).message})`)
  }
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
