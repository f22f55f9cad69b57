// The one request flow every adapter runs: identify → limit → headers → allow, delay or reject → refund at the end.

import { FloodgateError } from '../core/errors.js'
import type { Policy } from '../core/policy.js'
import type { Decision, PolicyDecision } from '../limiter/types.js'
import { clientIp } from './client-ip.js'
import { rateLimitHeaders, type HeaderList } from './headers.js'
import { ipKey } from './ip-key.js'
import { NOT_LIMITED, type KeyPart, type RequestInfo } from './keys.js'
import { describeValue, NO_POLICIES_ADVICE, type ResolvedHttpOptions } from './options.js'
import { rejectBody, type RejectBody } from './responses.js'

/** What an adapter tells the flow about one request. */
export interface HttpExchange {
  /** The socket's peer address. */
  remoteAddress: string | undefined
  method: string
  /** URL path without the query string. */
  path: string
  /** The matched route pattern, if the framework knows it before the handler runs. */
  route?: string
  header(name: string): string | undefined
}

/**
 * What the adapter does next.
 * - `pass`: not limited (skipped, or an error was reported and the request fails open).
 * - `allow`: set `headers`, continue, and call `finish(status)` once when the response is done
 *   (`undefined` if the client went away first) — it releases leases and applies the skip* refunds.
 * - `reject`: set `headers` and answer with `reject` (or the user's handler).
 */
export type LimitOutcome =
  | { action: 'pass' }
  | { action: 'allow'; decision: Decision; headers: HeaderList; finish: (status: number | undefined) => void }
  | { action: 'reject'; decision: Decision; headers: HeaderList; reject: RejectBody }

/** A denial as custom `handler` hooks receive it: the decision, the headers already set, and the default body. */
export type Rejection = Extract<LimitOutcome, { action: 'reject' }>

/** One key part after the limiter decided it. */
interface Charged {
  part: KeyPart
  decision: Decision
}

/**
 * Runs the flow for one request. Failures go to `onError` and the request passes, except a
 * misconfiguration (a FloodgateError `INVALID_OPTION`, e.g. a key function returning a number):
 * it would fail the same way on every request, so failing open would quietly limit nothing. It is
 * thrown, for the adapter to hand to the framework's error path.
 */
export async function limitRequest<Req>(options: ResolvedHttpOptions<Req>, req: Req, exchange: HttpExchange): Promise<LimitOutcome> {
  try {
    if (options.skip !== undefined && (await options.skip(req))) return { action: 'pass' }
    const info = requestInfo(options, exchange)
    const parts = await keyParts(options, req, info)
    if (parts === undefined) return { action: 'pass' }
    const cost = await requestCost(options, req)
    const charged = await Promise.all(
      parts.map(async (part) => ({ part, decision: await options.limiter.limit(part.key, { cost, policies: part.policies }) })),
    )
    let decision = mergeDecisions(charged.map((c) => c.decision))
    if (!decision.allowed && charged.length > 1) {
      // Each key is decided atomically, but not together: undo the keys that admitted.
      await undo(
        options,
        charged.filter((c) => c.decision.allowed),
        cost,
      )
    }
    if (decision.allowed && decision.delayMs > options.maxDelayMs) {
      await undo(options, charged, cost)
      decision = tooLongToWait(decision, options.maxDelayMs)
    }
    const shown = withoutShadowPolicies(decision, parts, options.limiter.policies)
    const headers = rateLimitHeaders(shown, options.headerStyles, Date.now())
    if (!decision.allowed) return { action: 'reject', decision, headers, reject: rejectBody(shown, options.body) }
    if (decision.delayMs > 0) await sleep(decision.delayMs)
    return { action: 'allow', decision, headers, finish: finisher(options, req, charged, cost) }
  } catch (error) {
    if (isMisconfiguration(error)) throw error
    reportError(options, error, req)
    return { action: 'pass' }
  }
}

/** An error in the middleware's setup rather than in one request (see limitRequest). */
export function isMisconfiguration(error: unknown): error is FloodgateError {
  return error instanceof FloodgateError && error.code === 'INVALID_OPTION'
}

function misconfigured(message: string): FloodgateError {
  return new FloodgateError('INVALID_OPTION', message)
}

function requestInfo<Req>(options: ResolvedHttpOptions<Req>, exchange: HttpExchange): RequestInfo {
  const forwarded = exchange.header(options.forwardedHeader)
  if (options.trust.kind === 'none' && forwarded !== undefined) warnForwardedIgnored(options)
  const address = clientIp(exchange.remoteAddress, forwarded, options.trust, options.forwardedHeader)
  return {
    ip: address === undefined ? undefined : ipKey(address, options.ipv6Subnet),
    method: exchange.method.toUpperCase(),
    path: exchange.path,
    route: exchange.route,
    header: exchange.header,
  }
}

const warned = new WeakSet<object>()

function warnForwardedIgnored<Req>(options: ResolvedHttpOptions<Req>): void {
  if (warned.has(options)) return
  warned.add(options)
  options.onWarning({
    code: 'FG_FORWARDED_HEADER_IGNORED',
    message:
      `A request carried ${options.forwardedHeader} but trustProxy is off, so clients are keyed by the socket address; ` +
      "behind a proxy every client would share the proxy's limit. Set trustProxy to the number of proxies or their CIDRs.",
  })
}

/** The key parts to decide; undefined when the key generator says the request is not limited. */
async function keyParts<Req>(options: ResolvedHttpOptions<Req>, req: Req, info: RequestInfo): Promise<KeyPart[] | undefined> {
  const result: unknown = await options.key(req, info)
  if (result === NOT_LIMITED) return undefined
  let parts: KeyPart[]
  if (typeof result === 'string') parts = [{ key: result }]
  else if (result === undefined || result === null) parts = []
  else if (Array.isArray(result)) parts = result.filter((part): part is KeyPart => part !== undefined && part !== null)
  else throw misconfigured(`key: the key function returned ${describeValue(result)}; ${KEY_RESULTS}`)
  const limiterPolicies = options.limiter.policies
  for (const part of parts) {
    if (typeof part !== 'object')
      throw misconfigured(
        `key: the key function returned a list holding ${describeValue(part)}; a list holds parts like { key: 'user:42' }; ${KEY_RESULTS}`,
      )
    if (typeof part.key !== 'string')
      throw misconfigured(`key: the key function returned a part whose key is ${describeValue(part.key)}; ${KEY_RESULTS}`)
    if (part.key === '') throw new FloodgateError('INVALID_REQUEST', `key: the key function returned an empty key; ${KEY_RESULTS}`)
    if (part.policies === undefined && limiterPolicies !== undefined && limiterPolicies.length === 0) {
      throw misconfigured(`limiter: this RateLimiter has no policies and a key part brought none: ${NO_POLICIES_ADVICE}`)
    }
  }
  if (parts.length > 0) return parts
  if (info.ip === undefined) {
    throw new FloodgateError(
      'INVALID_REQUEST',
      'the client IP is unknown (no socket address), so the request cannot be keyed; give a key function',
    )
  }
  return [{ key: `ip:${info.ip}` }]
}

const KEY_RESULTS =
  'return a string (e.g. `user:${id}`, or String(id) for a number), a list of { key, policies? } parts, ' +
  'undefined to key by client IP, or NOT_LIMITED'

async function requestCost<Req>(options: ResolvedHttpOptions<Req>, req: Req): Promise<number> {
  const cost = typeof options.cost === 'function' ? await options.cost(req) : options.cost
  if (!Number.isInteger(cost) || cost < 0) {
    throw new FloodgateError('INVALID_REQUEST', `cost: the cost function returned ${JSON.stringify(cost)}; return a whole number ≥ 0`)
  }
  return cost
}

/**
 * One decision for several keys: the denial with the longest wait, else the tightest admission,
 * listing every key's policies so headers show all of them.
 */
export function mergeDecisions(decisions: readonly Decision[]): Decision {
  if (decisions.length === 1) return decisions[0]
  let deciding = decisions[0]
  for (const d of decisions.slice(1)) {
    // A denial that can never pass outweighs any wait: the request as a whole can never pass.
    if (d.allowed !== deciding.allowed ? !d.allowed : !d.allowed ? waitRank(d) > waitRank(deciding) : d.remaining < deciding.remaining) {
      deciding = d
    }
  }
  return {
    ...deciding,
    delayMs: Math.max(...decisions.map((d) => d.delayMs)),
    over: decisions.some((d) => d.over),
    shadow: decisions.some((d) => d.shadow),
    policies: decisions.flatMap((d) => d.policies),
  }
}

function waitRank(decision: Decision): number {
  return decision.never === true ? Number.POSITIVE_INFINITY : decision.retryAfterMs
}

/**
 * The decision as clients see it: shadow policies are observed, never enforced, so they stay out
 * of headers and 429 bodies (a client must not back off because of them).
 */
function withoutShadowPolicies(decision: Decision, parts: readonly KeyPart[], own: readonly Policy[] | undefined): Decision {
  const shadow = new Set<string>()
  for (const part of parts) {
    for (const policy of part.policies ?? own ?? []) if (policy.shadow) shadow.add(policy.name)
  }
  if (shadow.size === 0) return decision
  return { ...decision, policies: decision.policies.filter((p) => !shadow.has(p.name)) }
}

/**
 * A shaping admission whose wait exceeds `maxDelayMs`, turned into a denial by the policy that
 * asked for the longest wait: the client may come back when the wait would fit.
 */
function tooLongToWait(decision: Decision, maxDelayMs: number): Decision {
  const shaping = decision.policies.reduce<PolicyDecision | undefined>(
    (a, p) => (a === undefined || p.delayMs > a.delayMs ? p : a),
    undefined,
  )
  const retryAfterMs = Math.max(1, decision.delayMs - maxDelayMs)
  const name = shaping?.name ?? decision.policy
  return {
    ...decision,
    allowed: false,
    policy: name,
    limit: shaping?.limit ?? decision.limit,
    remaining: 0,
    retryAfterMs,
    delayMs: 0,
    lease: undefined,
    policies: decision.policies.map((p) => (p.name === name ? { ...p, allowed: false, remaining: 0, retryAfterMs, delayMs: 0 } : p)),
  }
}

/** Gives back what admitted keys were charged (a refund also frees their concurrency slots). */
async function undo<Req>(options: ResolvedHttpOptions<Req>, charged: readonly Charged[], cost: number): Promise<void> {
  if (cost === 0) return
  await Promise.all(
    charged.filter((c) => c.decision.allowed).map((c) => options.limiter.refund(c.part.key, cost, { policies: c.part.policies })),
  )
}

/** The once-only end-of-response step: refund per skipSuccessful/skipFailed, else release leases. */
function finisher<Req>(
  options: ResolvedHttpOptions<Req>,
  req: Req,
  charged: readonly Charged[],
  cost: number,
): (status: number | undefined) => void {
  let done = false
  return (status) => {
    if (done) return
    done = true
    let refund = false
    if (options.skipSuccessfulRequests || options.skipFailedRequests) {
      const succeeded = status !== undefined && options.requestWasSuccessful(status, req)
      refund = succeeded ? options.skipSuccessfulRequests : options.skipFailedRequests
    }
    const work = refund
      ? undo(options, charged, cost)
      : Promise.all(charged.filter((c) => c.decision.lease !== undefined).map((c) => options.limiter.release(c.decision.lease!)))
    work.catch((error: unknown) => reportError(options, error, req))
  }
}

function reportError<Req>(options: ResolvedHttpOptions<Req>, error: unknown, req: Req): void {
  try {
    options.onError(error, req)
  } catch {
    // A throwing onError must not turn a reported failure into a crashed request.
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}
