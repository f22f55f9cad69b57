// Express adapter (Express 5, and 4: the same middleware signature): `app.use(rateLimit({ limiter }))`.

import type { NextFunction, Request, RequestHandler, Response } from 'express'
import type { Decision } from '../limiter/types.js'
import { limitRequest, type Rejection } from './limit-request.js'
import { nodeExchange, onNodeResponseDone, sendNodeRejection, setNodeHeaders } from './node-exchange.js'
import { refuseMiddlewareCall, resolveHook, resolveHttpOptions, type HttpLimitOptions } from './options.js'

declare global {
  namespace Express {
    interface Request {
      /** The rate-limit decision for this request, set by Floodgate's middleware. */
      rateLimit?: Decision
    }
  }
}

/** Options of the Express middleware. */
export interface ExpressRateLimitOptions extends HttpLimitOptions<Request> {
  /** Answers a denied request instead of the default 429 body (headers are already set). */
  handler?: (req: Request, res: Response, next: NextFunction, rejection: Rejection) => void | Promise<void>
}

/**
 * Express middleware. App-wide with `app.use(…)`, or per route (`app.post('/login', limit, …)`),
 * where `keys.route()` sees the route pattern. Errors of a custom `handler`, and misconfigurations
 * found in traffic (a key function returning a number), go to `next(error)`.
 */
export function rateLimit(options: ExpressRateLimitOptions): RequestHandler {
  // Express catches the throw and answers 500 with this message (its error handler logs it).
  refuseMiddlewareCall(arguments.length, options, 'app.use(rateLimit({ limiter }))')
  const resolved = resolveHttpOptions(options, ['handler'])
  const handler = resolveHook(options.handler)
  return async (req, res, next) => {
    const route = typeof req.route?.path === 'string' ? `${req.baseUrl}${req.route.path}` : undefined
    let outcome
    try {
      outcome = await limitRequest(resolved, req, nodeExchange(req, req.originalUrl, route))
    } catch (misconfiguration) {
      // Express 4 does not catch a rejected promise: hand it over, as Express 5 would.
      return next(misconfiguration)
    }
    if (outcome.action === 'pass') return next()
    req.rateLimit = outcome.decision
    setNodeHeaders(res, outcome.headers)
    if (outcome.action === 'allow') {
      onNodeResponseDone(res, outcome.finish)
      return next()
    }
    if (handler === undefined) return sendNodeRejection(res, outcome.reject)
    try {
      await handler(req, res, next, outcome)
    } catch (error) {
      next(error)
    }
  }
}
