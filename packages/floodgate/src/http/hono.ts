// Hono middleware: `app.use(rateLimit({ limiter }))`; the decision is `c.get('rateLimit')`.

import type { Context, MiddlewareHandler } from 'hono'
import type { Decision } from '../limiter/types.js'
import { limitRequest, type HttpExchange, type Rejection } from './limit-request.js'
import { refuseMiddlewareCall, resolveHook, resolveHttpOptions, type HttpLimitOptions } from './options.js'

/**
 * The context variables this middleware sets: type your app with them to read `c.get('rateLimit')`,
 * `new Hono<{ Variables: RateLimitVariables }>()`. Undefined for requests that were not limited
 * (`skip`, or a key returning NOT_LIMITED).
 */
export type RateLimitVariables = { rateLimit: Decision | undefined }

/** Options of the Hono middleware. */
export interface HonoRateLimitOptions extends HttpLimitOptions<Context> {
  /** Answers a denied request instead of the default 429 body (headers are already set). */
  handler?: (c: Context, rejection: Rejection) => Response | Promise<Response>
  /**
   * The peer address of the connection. Default: what @hono/node-server binds (`c.env.incoming`);
   * other runtimes pass theirs, e.g. Bun: `(c) => c.env.requestIP(c.req.raw)?.address`.
   */
  remoteAddress?: (c: Context) => string | undefined
}

interface NodeBindings {
  incoming?: { socket?: { remoteAddress?: string } }
  server?: NodeBindings
}

function nodeServerAddress(c: Context): string | undefined {
  const env = c.env as NodeBindings | undefined
  return (env?.server ?? env)?.incoming?.socket?.remoteAddress
}

function honoExchange(c: Context, remoteAddress: string | undefined): HttpExchange {
  return {
    remoteAddress,
    method: c.req.method,
    path: c.req.path,
    header: (name) => c.req.header(name),
  }
}

/**
 * Hono middleware. The response of an admitted request counts as finished when the downstream
 * handlers return (Hono has no socket event), which is when skip* refunds and lease releases happen.
 * A misconfiguration found in traffic (a key function returning a number) is thrown to Hono's onError.
 */
export function rateLimit(options: HonoRateLimitOptions): MiddlewareHandler<{ Variables: RateLimitVariables }> {
  // Hono's onError logs the throw and answers 500.
  refuseMiddlewareCall(arguments.length, options, 'app.use(rateLimit({ limiter }))')
  const { handler: userHandler, remoteAddress: userAddress, ...httpOptions } = options
  const resolved = resolveHttpOptions<Context>(httpOptions)
  const handler = resolveHook(userHandler)
  const remoteAddress = resolveHook(userAddress, 'remoteAddress') ?? nodeServerAddress
  return async (c, next) => {
    const outcome = await limitRequest(resolved, c, honoExchange(c, remoteAddress(c)))
    if (outcome.action === 'pass') return next()
    c.set('rateLimit', outcome.decision)
    for (const [name, value] of outcome.headers) c.header(name, value)
    if (outcome.action === 'reject') {
      if (handler !== undefined) return handler(c, outcome)
      c.header('Content-Type', outcome.reject.contentType)
      return c.body(outcome.reject.body, outcome.reject.status)
    }
    let status: number | undefined
    try {
      await next()
      status = c.res.status
    } finally {
      outcome.finish(status)
    }
  }
}
