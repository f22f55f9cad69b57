// Key generators: which bucket a request is counted in (IP, user, API key, route), alone or combined.

import { boundedKey, keyDigest } from '../core/bounded-key.js'
import type { Policy } from '../core/policy.js'
import { rulesKeyGenerator } from './rules-key.js'

/** What every key generator can read about a request, whatever the framework. */
export interface RequestInfo {
  /** The client address after proxy resolution, as key text (IPv6 grouped by prefix); undefined if unknown. */
  readonly ip: string | undefined
  /** Upper-case HTTP method. */
  readonly method: string
  /** URL path without the query string. */
  readonly path: string
  /** The matched route pattern when the framework knows it at this point (e.g. `/users/:id`). */
  readonly route: string | undefined
  /** A request header (lower- or mixed-case name); repeated headers joined by `, `. */
  header(name: string): string | undefined
}

/**
 * One bucket a request is counted in. `policies` (from `createPolicies`) replaces the limiter's
 * own for this key — e.g. per-IP and per-user limits of different sizes in one middleware.
 */
export interface KeyPart {
  key: string
  policies?: readonly Policy[]
}

/**
 * What a key generator returns for a request it deliberately does not limit (it passes with no
 * headers), e.g. when no rule matches it. A value of its own, so that no ordinary result — an
 * absent header, an empty list — can wave a request through by accident.
 */
export const NOT_LIMITED = Symbol('floodgate.notLimited')

/**
 * A key: one string, or several parts that must all admit the request (undefined parts are
 * dropped). `undefined`, or no part at all, means "count it by client IP" — so a request that
 * lacks a user header is still limited, never waved through. `NOT_LIMITED` lets it pass unlimited.
 */
export type KeyResult = string | undefined | typeof NOT_LIMITED | readonly (KeyPart | undefined)[]

/** Produces the key of a request from the framework's request and the neutral request info. */
export type KeyGenerator<Req = unknown> = (req: Req, info: RequestInfo) => KeyResult | Promise<KeyResult>

/** A generator of one key string (or undefined when it does not apply); these can be combined. */
export type StringKeyGenerator<Req = unknown> = (req: Req, info: RequestInfo) => string | undefined | Promise<string | undefined>

/** Header values are client-controlled: longer ones are hashed (`boundedKey`) so a key stays short in the store. */
const MAX_PLAIN_VALUE = 128

function present(value: string | number | undefined | null): string | undefined {
  if (value === undefined || value === null) return undefined
  const text = String(value).trim()
  return text === '' ? undefined : text
}

// The generators made by the built-in factories: they return key text only, never policies, so a
// limiter without policies of its own can be refused when the middleware is set up.
const stringGenerators = new WeakSet<object>()

function stringGenerator<Req>(generate: StringKeyGenerator<Req>): StringKeyGenerator<Req> {
  stringGenerators.add(generate)
  return generate
}

/** True for a generator made by `keys.ip()`, `keys.user(…)`, `keys.apiKey()`, `keys.route()` or `keys.combine(…)`. */
export function isStringKeyGenerator(value: unknown): boolean {
  return typeof value === 'function' && stringGenerators.has(value)
}

/** `ip:<address>` — the client IP (IPv6 as its /56 by default); the default key. */
export function ipKeyGenerator(): StringKeyGenerator {
  return stringGenerator((_req, info) => (info.ip === undefined ? undefined : `ip:${info.ip}`))
}

/**
 * `user:<id>` — from a header name (`'x-user-id'`) or a function reading the authenticated
 * principal the framework exposes, e.g. `(req) => req.user?.id`. Undefined when absent.
 */
export function userKeyGenerator<Req = unknown>(
  from: string | ((req: Req) => string | number | undefined | null),
): StringKeyGenerator<Req> {
  if (typeof from === 'string') {
    return stringGenerator((_req, info) => {
      const value = present(info.header(from))
      return value === undefined ? undefined : `user:${boundedKey(value, MAX_PLAIN_VALUE)}`
    })
  }
  return stringGenerator((req) => {
    const value = present(from(req))
    return value === undefined ? undefined : `user:${boundedKey(value, MAX_PLAIN_VALUE)}`
  })
}

/**
 * `apikey:<sha-256 prefix>` — from a header (default `x-api-key`). Hashed so that secrets never
 * appear in store keys, logs or metrics.
 */
export function apiKeyGenerator(header = 'x-api-key'): StringKeyGenerator {
  return stringGenerator((_req, info) => {
    const value = present(info.header(header))
    return value === undefined ? undefined : `apikey:${keyDigest(value)}`
  })
}

/** `route:<METHOD> <pattern>` — the matched route pattern if known, else the path. Usually combined with the IP. */
export function routeKeyGenerator(): StringKeyGenerator {
  return stringGenerator((_req, info) => `route:${info.method} ${info.route ?? info.path}`)
}

/**
 * One key made of several, joined by `|` (e.g. per IP per route). Undefined if any part is
 * undefined, so the request falls back to the IP key rather than to a broader shared bucket.
 */
export function combineKeys<Req = unknown>(...generators: StringKeyGenerator<Req>[]): StringKeyGenerator<Req> {
  return stringGenerator(async (req, info) => {
    const parts = await Promise.all(generators.map((generate) => generate(req, info)))
    return parts.some((part) => part === undefined) ? undefined : parts.join('|')
  })
}

/**
 * The built-in generators under short names: `keys.ip()`, `keys.user('x-user-id')`,
 * `keys.combine(…)`, and `keys.fromRules({ rules, domain, descriptors })` for rules files.
 */
export const keys = {
  ip: ipKeyGenerator,
  user: userKeyGenerator,
  apiKey: apiKeyGenerator,
  route: routeKeyGenerator,
  combine: combineKeys,
  fromRules: rulesKeyGenerator,
}

/** The `keys.*` name of a key factory, for the message when one is passed uncalled (`key: keys.ip`). */
export function keyFactoryName(value: unknown): string | undefined {
  for (const [name, factory] of Object.entries(keys)) if (factory === value) return name
  return undefined
}
