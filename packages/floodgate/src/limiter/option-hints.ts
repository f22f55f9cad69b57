// Option names users bring from other rate limiters, with the Floodgate option to use instead.

/** Where an option was given: to the middleware (any adapter) or to `new RateLimiter(…)`. */
export type OptionLevel = 'middleware' | 'limiter'

const POLICY_EXAMPLE = "policies: [{ algorithm: 'fixed-window', limit: 100, period: '15m' }]"
const ON_LIMITER = `on the limiter: new RateLimiter({ ${POLICY_EXAMPLE} })`

/**
 * One table for both levels. The names are express-rate-limit's, @fastify/rate-limit's and
 * rate-limiter-flexible's; `skip`, `handler`, `store`, `trustProxy`, `ipv6Subnet` and the
 * skip*Requests / requestWasSuccessful options share their names and shapes, so they need no hint
 * where Floodgate has them.
 */
const HINTS: Readonly<Record<string, Partial<Record<OptionLevel, string>>>> = {
  windowMs: {
    middleware: `the window is a policy's period, ${ON_LIMITER}`,
    limiter: `the window is a policy's period: ${POLICY_EXAMPLE}`,
  },
  timeWindow: {
    middleware: `the window is a policy's period, ${ON_LIMITER}`,
    limiter: `the window is a policy's period: ${POLICY_EXAMPLE}`,
  },
  duration: { limiter: `the window is a policy's period: ${POLICY_EXAMPLE}` },
  period: { middleware: `period belongs to a policy, ${ON_LIMITER}`, limiter: `period belongs to a policy: ${POLICY_EXAMPLE}` },
  window: { limiter: `the window is a policy's period: ${POLICY_EXAMPLE}` },
  max: {
    middleware: `the limit belongs to a policy, ${ON_LIMITER}`,
    limiter: `the limit belongs to a policy: ${POLICY_EXAMPLE}`,
  },
  limit: {
    middleware: `the limit belongs to a policy, ${ON_LIMITER}`,
    limiter: `the limit belongs to a policy: ${POLICY_EXAMPLE}`,
  },
  points: { limiter: `points is a policy's limit: ${POLICY_EXAMPLE}` },
  algorithm: { middleware: `algorithm belongs to a policy, ${ON_LIMITER}`, limiter: `algorithm belongs to a policy: ${POLICY_EXAMPLE}` },
  policy: { limiter: `policies takes a list: ${POLICY_EXAMPLE}` },
  policies: {
    middleware:
      `policies belong to the limiter: new RateLimiter({ ${POLICY_EXAMPLE} }), ` + 'or to a key part: key: (req) => [{ key, policies }]',
  },
  blockDuration: { limiter: "use a policy's blockMs: policies: [{ …, blockMs: '10m' }]" },
  ban: {
    middleware: "use a policy's blockMs (keep a key denied for a while after a denial), on the limiter: policies: [{ …, blockMs: '10m' }]",
  },
  standardHeaders: {
    middleware: "use headers: 'draft-8' (or 'draft-6' / 'draft-7'); headers: ['legacy', 'draft-8'] sends both generations (the default)",
  },
  legacyHeaders: {
    middleware:
      "use headers: list 'legacy' for X-RateLimit-*, e.g. headers: ['legacy', 'draft-8'] (the default), " +
      "or headers: 'draft-8' to leave them out",
  },
  addHeaders: { middleware: "use headers: 'legacy', 'draft-6', 'draft-7' or 'draft-8', a list of them, or false" },
  addHeadersOnExceeding: { middleware: 'use headers: the same headers are sent on admitted and denied requests (Retry-After on 429 only)' },
  enableDraftSpec: { middleware: "use headers: 'draft-6', 'draft-7' or 'draft-8' (the default is ['legacy', 'draft-8'])" },
  keyGenerator: { middleware: "use key: (req, info) => string, or a built-in such as keys.ip(), keys.user('x-user-id'), keys.apiKey()" },
  message: { middleware: "use handler to answer a denial yourself, or body: 'json' | 'problem' for the built-in 429" },
  statusCode: { middleware: 'use handler to answer a denial with another status (the built-in answer is 429)' },
  errorResponseBuilder: { middleware: "use handler to answer a denial yourself, or body: 'json' | 'problem'" },
  onLimitReached: { middleware: 'use handler (called for each denied request, with the decision)' },
  onExceeded: { middleware: 'use handler (called for each denied request, with the decision)' },
  onExceeding: { middleware: "read the decision (req.rateLimit, ctx.state.rateLimit, c.get('rateLimit')) in your handler" },
  allowList: { middleware: 'use skip: (req) => boolean (true: not limited, no headers), e.g. skip: (req) => allowed.has(req.ip)' },
  whitelist: { middleware: 'use skip: (req) => boolean (true: not limited, no headers)' },
  store: { middleware: 'the store belongs to the limiter: new RateLimiter({ store: new RedisStore({ client }), policies })' },
  redis: {
    middleware: "the store belongs to the limiter: new RateLimiter({ store: new RedisStore({ client }) }) (from 'floodgate/redis')",
    limiter: "use store: new RedisStore({ client }) (from 'floodgate/redis')",
  },
  client: { limiter: "use store: new RedisStore({ client }) (from 'floodgate/redis')" },
  storeClient: { limiter: "use store: new RedisStore({ client }) (from 'floodgate/redis')" },
  keyPrefix: {
    middleware: 'use prefix on the store: new RedisStore({ client, prefix })',
    limiter: 'use prefix on the store: new RedisStore({ client, prefix })',
  },
  nameSpace: { middleware: 'use prefix on the store: new RedisStore({ client, prefix })' },
  skipOnError: { middleware: "use the limiter's onStoreError: new RateLimiter({ onStoreError: 'open' | 'closed' | 'local' })" },
  passOnStoreError: { middleware: "use the limiter's onStoreError: new RateLimiter({ onStoreError: 'open' | 'closed' | 'local' })" },
  insuranceLimiter: { limiter: "use onStoreError: 'local' (decide in-process while the store is away)" },
  requestPropertyName: {
    middleware:
      "the decision is always req.rateLimit (request.rateLimit in Fastify, ctx.state.rateLimit in Koa, c.get('rateLimit') in Hono)",
  },
  validate: {
    middleware: 'nothing to switch: options are validated when given, and proxy-header mistakes are reported once through onWarning',
  },
}

/** The advice for an option Floodgate does not have at this level, or undefined when there is none. */
export function optionHint(field: string, level: OptionLevel): string | undefined {
  return Object.hasOwn(HINTS, field) ? HINTS[field][level] : undefined
}

/** The sentence for an unknown option: the hint when there is one, else the known names. */
export function unknownOptionMessage(field: string, level: OptionLevel, known: Iterable<string>): string {
  const hint = optionHint(field, level)
  return hint === undefined ? `unknown option; known options are ${[...known].join(', ')}` : `unknown option: ${hint}`
}
