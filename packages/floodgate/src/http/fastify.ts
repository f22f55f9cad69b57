// Fastify plugin: limits every route of the scope it is registered in; `config: { rateLimit }` per route overrides or opts out.

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
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

/** Limits one request; resolves to the reply when it answered the request (a denial), else undefined. */
type LimitHook = (request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply | undefined>

/** The limiting step for one set of options, validated when built. */
function routeHook(options: RouteLimitOptions): LimitHook {
  const { handler: userHandler, ...httpOptions } = options
  // A missing limiter is reported here, by name, like every other option.
  const resolved = resolveHttpOptions(httpOptions as HttpLimitOptions<FastifyRequest>)
  const handler = resolveHook(userHandler)
  return async (request, reply) => {
    const exchange = nodeExchange(request.raw, request.url, request.routeOptions.url)
    const outcome = await limitRequest(resolved, request, exchange)
    if (outcome.action === 'pass') return undefined
    request.rateLimit = outcome.decision
    for (const [name, value] of outcome.headers) reply.header(name, value)
    if (outcome.action === 'allow') {
      onNodeResponseDone(reply.raw, outcome.finish)
      return undefined
    }
    if (handler !== undefined) {
      await handler(request, reply, outcome)
      return reply
    }
    return reply.code(outcome.reject.status).type(outcome.reject.contentType).send(outcome.reject.body)
  }
}

/**
 * The plugin's hooks, built once per options object and validated when built: the plugin's own
 * (`base`) and one per route `config.rateLimit`, keyed by that object so each is resolved once.
 */
class RouteHooks {
  private readonly byConfig = new WeakMap<object, LimitHook>()
  private baseHook: LimitHook | undefined

  constructor(
    private readonly base: RouteLimitOptions,
    private readonly global: boolean,
  ) {}

  /** The hook for a route's `config.rateLimit`, or undefined when the route is not limited. */
  forRoute(config: Partial<FastifyRateLimitOptions> | false | undefined): LimitHook | undefined {
    if (config === false) return undefined
    if (config === undefined) {
      if (!this.global) return undefined
      this.baseHook ??= routeHook(this.base)
      return this.baseHook
    }
    let hook = this.byConfig.get(config)
    if (hook === undefined) {
      hook = routeHook({ ...this.base, ...config })
      this.byConfig.set(config, hook)
    }
    return hook
  }
}

/**
 * `await app.register(floodgate, { limiter })`. Not encapsulated (the skip-override symbol, as
 * fastify-plugin sets it), so it applies to the scope it is registered in and to that scope's
 * child plugins registered after it.
 *
 * It limits through one scope-wide onRequest hook rather than by editing routes in onRoute: an
 * onRoute hook only sees routes added after the plugin ran, and `app.register(...)` without await
 * runs the plugin at `ready()`, after the routes declared below it (which then went unlimited).
 * Hooks added with addHook apply to every route of the scope whenever it was declared.
 */
export async function floodgate(fastify: FastifyInstance, options: FastifyRateLimitOptions): Promise<void> {
  const { global = true, ...base } = options ?? {}
  if (typeof global !== 'boolean') {
    throw new FloodgateError(
      'INVALID_OPTION',
      `global: must be true (limit every route) or false (only routes with config.rateLimit), got ${JSON.stringify(global)}`,
    )
  }
  const hooks = new RouteHooks(base, global)
  // Validate the plugin's own options at registration, not at the first request; with `global:
  // false` each route may bring what is missing (e.g. its own limiter), so routes validate then.
  if (global) hooks.forRoute(undefined)
  if (!fastify.hasRequestDecorator('rateLimit')) fastify.decorateRequest('rateLimit', null)
  // Routes added after the plugin ran have their config.rateLimit validated as they are added;
  // those declared before it (register not awaited) are validated at their first request.
  fastify.addHook('onRoute', (route) => void hooks.forRoute(route.config?.rateLimit))
  fastify.addHook('onRequest', async (request, reply) => {
    // Not-found answers belong to no route; they were never limited when the plugin attached to routes.
    if (request.is404) return undefined
    const limit = hooks.forRoute(request.routeOptions.config?.rateLimit)
    // Returning the reply after a denial tells Fastify the request is answered.
    return limit === undefined ? undefined : limit(request, reply)
  })
}

// What fastify-plugin would set: skip-override keeps the hooks in the registering scope instead of
// a new encapsulated child (where they would apply to no route at all).
Object.assign(floodgate, {
  [Symbol.for('skip-override')]: true,
  [Symbol.for('fastify.display-name')]: 'floodgate',
  [Symbol.for('plugin-meta')]: { name: 'floodgate', fastify: '5.x' },
})
