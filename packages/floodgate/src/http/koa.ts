// Koa middleware: `app.use(rateLimit({ limiter }))`; the decision is `ctx.state.rateLimit`.

import type { Context, Middleware } from 'koa'
import { limitRequest, type Rejection } from './limit-request.js'
import { nodeExchange, onNodeResponseDone } from './node-exchange.js'
import { refuseMiddlewareCall, resolveHook, resolveHttpOptions, type HttpLimitOptions } from './options.js'

/** Options of the Koa middleware. */
export interface KoaRateLimitOptions extends HttpLimitOptions<Context> {
  /** Answers a denied request instead of the default 429 body (headers are already set). */
  handler?: (ctx: Context, rejection: Rejection) => void | Promise<void>
}

/** The route pattern @koa/router records, when the middleware runs inside a router. */
function matchedRoute(ctx: Context): string | undefined {
  const route: unknown = (ctx as { _matchedRoute?: unknown })._matchedRoute
  return typeof route === 'string' ? route : undefined
}

/**
 * Koa middleware. Refunds and lease releases happen when the underlying response closes. A
 * misconfiguration found in traffic (a key function returning a number) is thrown to Koa.
 */
export function rateLimit(options: KoaRateLimitOptions): Middleware {
  // Koa turns the throw into a 500 and logs the message ('error' event).
  refuseMiddlewareCall(arguments.length, options, 'app.use(rateLimit({ limiter }))')
  const { handler: userHandler, ...httpOptions } = options
  const resolved = resolveHttpOptions<Context>(httpOptions)
  const handler = resolveHook(userHandler)
  return async (ctx, next) => {
    const outcome = await limitRequest(resolved, ctx, nodeExchange(ctx.req, ctx.originalUrl, matchedRoute(ctx)))
    if (outcome.action === 'pass') return next()
    ctx.state.rateLimit = outcome.decision
    for (const [name, value] of outcome.headers) ctx.set(name, value)
    if (outcome.action === 'allow') {
      onNodeResponseDone(ctx.res, outcome.finish)
      return next()
    }
    if (handler !== undefined) return handler(ctx, outcome)
    ctx.status = outcome.reject.status
    ctx.type = outcome.reject.contentType
    ctx.body = outcome.reject.body
  }
}
