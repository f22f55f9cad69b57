// Middleware options: documented field by field, validated once at setup into what the request flow runs.

import { parseDuration, type Duration } from '../core/duration.js'
import { FloodgateError } from '../core/errors.js'
import type { Policy } from '../core/policy.js'
import { unknownOptionMessage } from '../limiter/option-hints.js'
import type { Decision, Lease, LimitOptions } from '../limiter/types.js'
import { compileProxyTrust, type ForwardedHeader, type ProxyTrust, type TrustProxy } from './client-ip.js'
import { DEFAULT_HEADER_STYLES, HEADER_STYLES, type HeaderStyle } from './headers.js'
import { DEFAULT_IPV6_SUBNET } from './ip-key.js'
import { ipKeyGenerator, isStringKeyGenerator, keyFactoryName, type KeyGenerator } from './keys.js'
import type { BodyFormat } from './responses.js'

/** What the middleware needs of a limiter: `RateLimiter` has it. */
export interface HttpLimiter {
  /** The limiter's own policies; shadow ones are left out of headers and bodies (they never deny). */
  readonly policies?: readonly Policy[]
  limit(key: string, options?: LimitOptions): Promise<Decision>
  refund(key: string, cost: number, options?: { policies?: readonly Policy[] }): Promise<unknown>
  release(lease: Lease): Promise<unknown>
}

/** A misconfiguration noticed while serving (not at setup), reported once per middleware. */
export interface HttpWarning {
  code: 'FG_FORWARDED_HEADER_IGNORED'
  message: string
}

/** Options every adapter accepts. `Req` is the framework's request type (Express `Request`, Koa `Context`, …). */
export interface HttpLimitOptions<Req> {
  /** The limiter that decides (its policies apply unless a key part brings its own). Required. */
  limiter: HttpLimiter
  /** Which bucket(s) a request is counted in; default the client IP (`keys.ip()`). See `keys`. */
  key?: KeyGenerator<Req>
  /** Units a request costs (default 1), or a function of the request (e.g. by payload size). */
  cost?: number | ((req: Req) => number | Promise<number>)
  /** Requests for which this returns true are not limited and get no headers (health checks, allow-lists). */
  skip?: (req: Req) => boolean | Promise<boolean>
  /** Which proxies to believe for the client IP; default `false` (the socket address only). */
  trustProxy?: TrustProxy
  /** The forwarding header your proxies write; default `x-forwarded-for`. Believe only the one they overwrite or append. */
  forwardedHeader?: ForwardedHeader
  /**
   * IPv6 clients are keyed by this prefix (default 56) so rotating addresses in one allocation shares a limit;
   * `false` keys each address.
   */
  ipv6Subnet?: number | false
  /** Header generations to send; default `['legacy', 'draft-8']`; `false` for none (`Retry-After` is still sent on 429). */
  headers?: HeaderStyle | readonly HeaderStyle[] | false
  /** The 429 body: `json` (default) or `problem` (application/problem+json). */
  body?: BodyFormat
  /** Refund requests that succeeded (see `requestWasSuccessful`) when the response finishes: count failures only. */
  skipSuccessfulRequests?: boolean
  /** Refund requests that failed when the response finishes: count successes only. */
  skipFailedRequests?: boolean
  /** Whether a finished request succeeded; default status < 400. */
  requestWasSuccessful?: (status: number, req: Req) => boolean
  /** Shaping policies ask admitted requests to wait; a wait longer than this is a 429 instead (default `'5s'`, 0 never waits). */
  maxDelayMs?: Duration
  /** Called when identification or the limiter fails unexpectedly; the request then passes (fail open). Default: a process warning. */
  onError?: (error: unknown, req: Req) => void
  /** Called once per middleware for a misconfiguration seen in traffic; default: a process warning. */
  onWarning?: (warning: HttpWarning) => void
}

/** Validated options, as the request flow uses them. */
export interface ResolvedHttpOptions<Req> {
  limiter: HttpLimiter
  key: KeyGenerator<Req>
  cost: number | ((req: Req) => number | Promise<number>)
  skip: ((req: Req) => boolean | Promise<boolean>) | undefined
  trust: ProxyTrust
  forwardedHeader: ForwardedHeader
  ipv6Subnet: number | false
  headerStyles: readonly HeaderStyle[]
  body: BodyFormat
  skipSuccessfulRequests: boolean
  skipFailedRequests: boolean
  requestWasSuccessful: (status: number, req: Req) => boolean
  maxDelayMs: number
  onError: (error: unknown, req: Req) => void
  onWarning: (warning: HttpWarning) => void
}

const DEFAULT_MAX_DELAY_MS = 5_000

const KNOWN_OPTIONS = new Set([
  'limiter',
  'key',
  'cost',
  'skip',
  'trustProxy',
  'forwardedHeader',
  'ipv6Subnet',
  'headers',
  'body',
  'skipSuccessfulRequests',
  'skipFailedRequests',
  'requestWasSuccessful',
  'maxDelayMs',
  'onError',
  'onWarning',
])

function invalid(field: string, message: string): FloodgateError {
  return new FloodgateError('INVALID_OPTION', `${field}: ${message}`)
}

/** A value as a message names it: `the number 42`, `the string "id"`, `an object`, `null`. */
export function describeValue(value: unknown): string {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'an array'
  switch (typeof value) {
    case 'string':
      return `the string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`
    case 'number':
    case 'bigint':
    case 'boolean':
      return `the ${typeof value} ${String(value)}`
    case 'object':
      return 'an object'
    default:
      return `a ${typeof value}`
  }
}

function optionalFunction<T>(value: T | undefined, field: string): T | undefined {
  if (value !== undefined && typeof value !== 'function') throw invalid(field, `must be a function, got ${describeValue(value)}`)
  return value
}

/**
 * Refuses a middleware factory called as if it were the middleware (`app.use(rateLimit)`): the
 * framework then calls it with a request, a context or (req, res, next). `call` is how the user
 * should have written it.
 */
export function refuseMiddlewareCall(argCount: number, options: unknown, call: string, factory = 'rateLimit({ limiter })'): void {
  const looksLikeOptions = options !== null && typeof options === 'object' && 'limiter' in options
  if (argCount < 2 || looksLikeOptions) return
  const name = factory.slice(0, factory.indexOf('('))
  throw new FloodgateError(
    'INVALID_OPTION',
    `${name} was used as the middleware itself; call ${factory} first and use what it returns: ${call}`,
  )
}

/** The key generator: a function; the usual slips (a header name, an uncalled `keys.ip`) are named. */
function resolveKey<Req>(value: unknown): KeyGenerator<Req> {
  if (value === undefined) return ipKeyGenerator()
  if (typeof value !== 'function') {
    const hint =
      typeof value === 'string'
        ? `; to key by a header write keys.user(${JSON.stringify(value)}) or (req, info) => info.header(${JSON.stringify(value)})`
        : ''
    throw invalid('key', `must be a function (req, info) => key of the request, got ${describeValue(value)}${hint}`)
  }
  const factory = keyFactoryName(value)
  if (factory !== undefined)
    throw invalid(
      'key',
      `keys.${factory} makes a key function; call it: key: keys.${factory}(${TAKES_NO_ARGUMENT.includes(factory) ? '' : '…'})`,
    )
  return value as KeyGenerator<Req>
}

// The key factories that take no argument: `keys.ip()`, `keys.route()`, `keys.apiKey()`.
const TAKES_NO_ARGUMENT: readonly string[] = ['ip', 'route', 'apiKey']

/** Says what to do about a limiter without policies of its own (at setup, or when a key part brings none). */
export const NO_POLICIES_ADVICE =
  "create it with some, e.g. new RateLimiter({ policies: [{ algorithm: 'gcra', limit: 100, period: '1m' }] }), " +
  'or return [{ key, policies }] parts from key'

/**
 * A limiter without policies of its own decides only keys that bring theirs (`[{ key, policies }]`
 * parts, `keys.fromRules`); with the default key or a `keys.*` string key every request would fail.
 */
function requirePolicies(limiter: HttpLimiter, key: unknown): void {
  if (limiter.policies === undefined || limiter.policies.length > 0) return
  if (key !== undefined && !isStringKeyGenerator(key)) return
  const which = key === undefined ? 'the default key (the client IP)' : 'this key'
  throw invalid('limiter', `this RateLimiter has no policies, and ${which} brings none, so nothing could be limited: ${NO_POLICIES_ADVICE}`)
}

/** Validates an adapter's own function option (`handler`, …): a function, if given. */
export function resolveHook<T>(value: T | undefined, field = 'handler'): T | undefined {
  return optionalFunction(value, field)
}

function optionalBoolean(value: unknown, field: string): boolean {
  if (value !== undefined && typeof value !== 'boolean') throw invalid(field, `must be true or false, got ${JSON.stringify(value)}`)
  return value === true
}

function resolveLimiter(value: unknown): HttpLimiter {
  const candidate = value as Partial<HttpLimiter> | undefined
  if (
    candidate === undefined ||
    candidate === null ||
    typeof candidate.limit !== 'function' ||
    typeof candidate.refund !== 'function' ||
    typeof candidate.release !== 'function'
  ) {
    throw invalid('limiter', 'required: pass a RateLimiter, e.g. { limiter: new RateLimiter({ policies: [...] }) }')
  }
  return candidate as HttpLimiter
}

function resolveCost<Req>(value: HttpLimitOptions<Req>['cost']): ResolvedHttpOptions<Req>['cost'] {
  if (value === undefined) return 1
  if (typeof value === 'function') return value
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) {
    throw invalid('cost', `must be a whole number ≥ 0 or a function of the request, got ${JSON.stringify(value)}`)
  }
  return value
}

function resolveIpv6Subnet(value: unknown): number | false {
  if (value === undefined) return DEFAULT_IPV6_SUBNET
  if (value === false) return false
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 128) {
    throw invalid('ipv6Subnet', `must be a prefix length from 1 to 128 (typically 48–64) or false, got ${JSON.stringify(value)}`)
  }
  return value
}

/** Validates `headers`: known styles only, and at most one of draft-6/7/8 since they share field names. */
export function resolveHeaderStyles(value: unknown): readonly HeaderStyle[] {
  if (value === undefined) return DEFAULT_HEADER_STYLES
  if (value === false) return []
  const list: unknown[] = Array.isArray(value) ? value : [value]
  for (const style of list) {
    if (!(HEADER_STYLES as readonly unknown[]).includes(style)) {
      throw invalid('headers', `unknown style ${JSON.stringify(style)}; use ${HEADER_STYLES.join(', ')}, a list of them, or false`)
    }
  }
  const styles = [...new Set(list as HeaderStyle[])]
  const drafts = styles.filter((style) => style !== 'legacy')
  if (drafts.length > 1) {
    throw invalid(
      'headers',
      `${drafts.join(' and ')} both write RateLimit-Policy in different syntaxes; choose one of them (legacy may accompany it)`,
    )
  }
  return styles
}

function resolveMaxDelay(value: unknown): number {
  if (value === undefined) return DEFAULT_MAX_DELAY_MS
  if (value === 0) return 0
  return parseDuration(value, 'maxDelayMs')
}

function resolveForwardedHeader(value: unknown): ForwardedHeader {
  if (value === undefined) return 'x-forwarded-for'
  if (value === 'x-forwarded-for' || value === 'forwarded') return value
  throw invalid('forwardedHeader', `unknown header ${JSON.stringify(value)}; use 'x-forwarded-for' or 'forwarded'`)
}

function resolveBody(value: unknown): BodyFormat {
  if (value === undefined) return 'json'
  if (value === 'json' || value === 'problem') return value
  throw invalid('body', `unknown format ${JSON.stringify(value)}; use 'json' or 'problem'`)
}

function defaultOnError(error: unknown): void {
  process.emitWarning(`floodgate: rate limiting skipped for a request: ${error instanceof Error ? error.message : String(error)}`, {
    code: 'FG_HTTP_ERROR',
  })
}

function defaultOnWarning(warning: HttpWarning): void {
  process.emitWarning(warning.message, { code: warning.code })
}

/**
 * Validates adapter options; every error names the field and what to write. `extra` lists the
 * adapter's own option names (e.g. `handler`), which it validates itself.
 */
export function resolveHttpOptions<Req>(options: HttpLimitOptions<Req>, extra: readonly string[] = []): ResolvedHttpOptions<Req> {
  if (options === null || typeof options !== 'object') {
    throw invalid('options', 'expected an object like { limiter: new RateLimiter({ policies: [...] }) }')
  }
  for (const field of Object.keys(options)) {
    if (!KNOWN_OPTIONS.has(field) && !extra.includes(field)) {
      throw invalid(field, unknownOptionMessage(field, 'middleware', [...KNOWN_OPTIONS, ...extra]))
    }
  }
  const skipSuccessfulRequests = optionalBoolean(options.skipSuccessfulRequests, 'skipSuccessfulRequests')
  const skipFailedRequests = optionalBoolean(options.skipFailedRequests, 'skipFailedRequests')
  if (skipSuccessfulRequests && skipFailedRequests) {
    throw invalid('skipFailedRequests', 'together with skipSuccessfulRequests nothing would ever be counted; choose one')
  }
  const limiter = resolveLimiter(options.limiter)
  const key = resolveKey<Req>(options.key)
  requirePolicies(limiter, options.key)
  return {
    limiter,
    key,
    cost: resolveCost(options.cost),
    skip: optionalFunction(options.skip, 'skip'),
    trust: compileProxyTrust(options.trustProxy),
    forwardedHeader: resolveForwardedHeader(options.forwardedHeader),
    ipv6Subnet: resolveIpv6Subnet(options.ipv6Subnet),
    headerStyles: resolveHeaderStyles(options.headers),
    body: resolveBody(options.body),
    skipSuccessfulRequests,
    skipFailedRequests,
    requestWasSuccessful: optionalFunction(options.requestWasSuccessful, 'requestWasSuccessful') ?? ((status) => status < 400),
    maxDelayMs: resolveMaxDelay(options.maxDelayMs),
    onError: optionalFunction(options.onError, 'onError') ?? defaultOnError,
    onWarning: optionalFunction(options.onWarning, 'onWarning') ?? defaultOnWarning,
  }
}
