// node:http adapter: a check `(req, res) => Promise<boolean>` and a wrapper for a plain request handler.

import { ServerResponse, type IncomingMessage } from 'node:http'
import { FloodgateError } from '../core/errors.js'
import type { Decision } from '../limiter/types.js'
import { limitRequest, type Rejection } from './limit-request.js'
import { nodeExchange, onNodeResponseDone, sendNodeRejection, setNodeHeaders } from './node-exchange.js'
import { refuseMiddlewareCall, resolveHook, resolveHttpOptions, type HttpLimitOptions } from './options.js'

declare module 'node:http' {
  interface IncomingMessage {
    /** The rate-limit decision for this request, set by Floodgate's middleware. */
    rateLimit?: Decision
  }
}

/** Options of the node:http adapter. */
export interface NodeRateLimitOptions extends HttpLimitOptions<IncomingMessage> {
  /** Answers a denied request instead of the default 429 body (headers are already set). */
  handler?: (req: IncomingMessage, res: ServerResponse, rejection: Rejection) => unknown
}

type Check = (req: IncomingMessage, res: ServerResponse) => Promise<boolean>

const RIGHT_CALL =
  'createServer(withRateLimit(handler, { limiter })), or const limit = rateLimit({ limiter }) then if (await limit(req, res)) …'

/** Whether a misconfiguration was already warned about; one per middleware, as it repeats on every request. */
interface Warned {
  done: boolean
}

/**
 * node:http has no error path to throw a misconfiguration into: a throw in a request listener
 * would end the process. So it is answered with a 500 and told once as a process warning.
 */
function answerMisconfigured(res: ServerResponse, error: FloodgateError, body: string, warned: Warned): void {
  if (!warned.done) {
    warned.done = true
    process.emitWarning(error.message, { code: 'FG_MISCONFIGURED' })
  }
  if (res.headersSent) return
  res.statusCode = 500
  res.setHeader('Content-Type', 'text/plain; charset=utf-8')
  res.end(`${body}\n`)
}

// The factory given to createServer is called afresh per request: its warning is once per process.
const misuseWarned: Warned = { done: false }

/** When the factory itself was given to createServer: answers the request, or rethrows anything else. */
function refuseAsListener(argCount: number, options: unknown, res: unknown, factory?: string): Check | undefined {
  try {
    refuseMiddlewareCall(argCount, options, RIGHT_CALL, factory)
    return undefined
  } catch (error) {
    if (!(res instanceof ServerResponse) || !(error instanceof FloodgateError)) throw error
    answerMisconfigured(res, error, error.message, misuseWarned)
    return async () => false
  }
}

/**
 * Returns a check to call first in a request handler: it sets the headers and `req.rateLimit`,
 * answers 429 itself when denied, and resolves to whether the handler should go on. A
 * misconfiguration found in traffic (a key function returning a number) is answered with a 500.
 */
export function rateLimit(options: NodeRateLimitOptions): Check {
  const refused = refuseAsListener(arguments.length, options, arguments[1])
  if (refused !== undefined) return refused
  const resolved = resolveHttpOptions(options, ['handler'])
  const handler = resolveHook(options.handler)
  const warned: Warned = { done: false }
  return async (req, res) => {
    let outcome
    try {
      outcome = await limitRequest(resolved, req, nodeExchange(req))
    } catch (misconfiguration) {
      answerMisconfigured(
        res,
        misconfiguration as FloodgateError,
        'rate limiting is misconfigured; the server log says what to change',
        warned,
      )
      return false
    }
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
  handle: (req: IncomingMessage, res: ServerResponse) => unknown,
  options: NodeRateLimitOptions,
): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  if (typeof handle !== 'function') {
    // createServer(withRateLimit): called with (req, res) by the server itself.
    const refused = refuseAsListener(2, handle, options, 'withRateLimit(handler, { limiter })')
    if (refused !== undefined) return async () => {}
    throw new FloodgateError(
      'INVALID_OPTION',
      `handler: withRateLimit(handler, options) takes your request handler first, got ${typeof handle}`,
    )
  }
  const check = rateLimit(options)
  return async (req, res) => {
    if (await check(req, res)) await handle(req, res)
  }
}
