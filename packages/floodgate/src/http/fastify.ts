// Fastify plugin: limits every route registered after it; `config: { rateLimit }` per route overrides or opts out.

import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler, RouteOptions } from 'fastify'
import { FloodgateError } from '../core/errors.js'
import type { Decision } from '../limiter/types.js'
import { limitRequest, type Rejection } from './limit-request.js'
import { nodeExchange, onNodeResponseDone } from './node-exchange.js'
import { resolveHook, resolveHttpOptions, type HttpLimiter, type HttpLimitOptions } from './options.js'

/** Options of the Fastify plugin; a route's `config.rateLimit` may override any of them. */
export interface FastifyRateLimitOptions extends Omit<HttpLimitOptions<FastifyRequest>, 'limiter'> {
  /** The limiter; required unless `global: false` and every limited route brings its own in `config.rateLimit`. */
  limiter?: HttpLimiter
  /** Answers a denied request instead of the default 429 body (headers are already set); may return the reply. */
  handler?: (request: FastifyRequest, reply: FastifyReply, rejection: Rejection) => unknown
  /** `true` (default): every route is limited; `false`: only routes with `config.rateLimit`. */
  global?: boolean
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The rate-limit decision for this request, set by Floodgate's plugin. */
    rateLimit: Decision | null
  }
  interface FastifyContextConfig {
    /** Floodgate options for this route (merged over the plugin's), or `false` to leave it unlimited. */
    rateLimit?: Partial<FastifyRateLimitOptions> | false
  }
}

type RouteLimitOptions = Omit<FastifyRateLimitOptions, 'global'>

/** The limiting hook for one route, built (and its options validated) when the route is registered. */
function routeHook(options: RouteLimitOptions): onRequestHookHandler {
  const { handler: userHandler, ...httpOptions } = options
  // A missing limiter is reported here, by name, like every other option.
  const resolved = resolveHttpOptions(httpOptions as HttpLimitOptions<FastifyRequest>)
  const handler = resolveHook(userHandler)
  return async function floodgateOnRequest(request, reply) {
    const exchange = nodeExchange(request.raw, request.url, request.routeOptions.url)
    const outcome = await limitRequest(resolved, request, exchange)
    if (outcome.action === 'pass') return
    request.rateLimit = outcome.decision
    for (const [name, value] of outcome.headers) reply.header(name, value)
    if (outcome.action === 'allow') {
      onNodeResponseDone(reply.raw, outcome.finish)
      return
    }
    if (handler !== undefined) {
      await handler(request, reply, outcome)
      return reply
    }
    return reply.code(outcome.reject.status).type(outcome.reject.contentType).send(outcome.reject.body)
  }
}

function withHook(existing: RouteOptions['onRequest'], hook: onRequestHookHandler): onRequestHookHandler[] {
  const list = existing === undefined ? [] : Array.isArray(existing) ? existing : [existing]
  return [hook, ...(list as onRequestHookHandler[])]
}

/**
 * `await app.register(floodgate, { limiter })` — before the routes it should limit. Not
 * encapsulated (like fastify-plugin), so it applies to the scope it is registered in.
 */
export async function floodgate(fastify: FastifyInstance, options: FastifyRateLimitOptions): Promise<void> {
  const { global = true, ...base } = options
  if (typeof global !== 'boolean') {
    throw new FloodgateError('INVALID_OPTION', `global: must be true (limit every route) or false (only routes with config.rateLimit), got ${JSON.stringify(global)}`)
  }
  // Validate the plugin's own options at registration, not at the first route; with `global:
  // false` each route may bring what is missing (e.g. its own limiter), so routes validate then.
  if (global) routeHook(base)
  if (!fastify.hasRequestDecorator('rateLimit')) fastify.decorateRequest('rateLimit', null)
  fastify.addHook('onRoute', (route) => {
    const config = route.config?.rateLimit
    if (config === false || (config === undefined && !global)) return
    route.onRequest = withHook(route.onRequest, routeHook({ ...base, ...config }))
  })
}

Object.assign(floodgate, {
  [Symbol.for('skip-override')]: true,
  [Symbol.for('fastify.display-name')]: 'floodgate',
  [Symbol.for('plugin-meta')]: { name: 'floodgate', fastify: '5.x' },
})
