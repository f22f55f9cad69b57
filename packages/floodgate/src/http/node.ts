// node:http adapter: a check `(req, res) => Promise<boolean>` and a wrapper for a plain request handler.

import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Decision } from '../limiter/types.js'
import { limitRequest, type Rejection } from './limit-request.js'
import { nodeExchange, onNodeResponseDone, sendNodeRejection, setNodeHeaders } from './node-exchange.js'
import { resolveHook, resolveHttpOptions, type HttpLimitOptions } from './options.js'

declare module 'node:http' {
  interface IncomingMessage {
    /** The rate-limit decision for this request, set by Floodgate's middleware. */
    rateLimit?: Decision
  }
}

/** Options of the node:http adapter. */
export interface NodeRateLimitOptions extends HttpLimitOptions<IncomingMessage> {
  /** Answers a denied request instead of the default 429 body (headers are already set). */
  handler?: (req: IncomingMessage, res: ServerResponse, rejection: Rejection) => void | Promise<void>
}

/**
 * Returns a check to call first in a request handler: it sets the headers and `req.rateLimit`,
 * answers 429 itself when denied, and resolves to whether the handler should go on.
 */
export function rateLimit(options: NodeRateLimitOptions): (req: IncomingMessage, res: ServerResponse) => Promise<boolean> {
  const resolved = resolveHttpOptions(options, ['handler'])
  const handler = resolveHook(options.handler)
  return async (req, res) => {
    const outcome = await limitRequest(resolved, req, nodeExchange(req))
    if (outcome.action === 'pass') return true
    req.rateLimit = outcome.decision
    setNodeHeaders(res, outcome.headers)
    if (outcome.action === 'allow') {
      onNodeResponseDone(res, outcome.finish)
      return true
    }
    if (handler === undefined) {
      sendNodeRejection(res, outcome.reject)
    } else {
      try {
        await handler(req, res, outcome)
      } catch (error) {
        resolved.onError(error, req)
        sendNodeRejection(res, outcome.reject)
      }
    }
    return false
  }
}

/** Wraps a request handler so that it runs only for admitted requests: `createServer(withRateLimit(handle, options))`. */
export function withRateLimit(
  handle: (req: IncomingMessage, res: ServerResponse) => void | Promise<void>,
  options: NodeRateLimitOptions,
): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  const check = rateLimit(options)
  return async (req, res) => {
    if (await check(req, res)) await handle(req, res)
  }
}
