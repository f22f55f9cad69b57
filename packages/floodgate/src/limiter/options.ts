// Validates RateLimiterOptions once, at construction: every mistake is a FloodgateError naming the field.

import { parseDuration } from '../core/duration.js'
import { FloodgateError } from '../core/errors.js'
import { createPolicies, type Policy, type PolicyOptions } from '../core/policy.js'
import type { Store } from '../stores/store.js'
import { unknownOptionMessage } from './option-hints.js'
import { REAL_TIMERS, type Timers } from './timeout.js'
import type { OnStoreError, RateLimiterOptions, StoreCallHook } from './types.js'

/** The options with defaults applied and durations in milliseconds. */
export interface ResolvedOptions {
  store: Store | undefined
  policies: Policy[] | undefined
  /** The longest any store call waits (the timeout's maximum; the whole timeout when fixed). */
  timeoutMs: number
  /** The shortest adaptive deadline; equal to `timeoutMs` when the timeout is fixed. */
  timeoutMinMs: number
  onStoreError: OnStoreError
  instances: number
  breakerFailures: number
  breakerCooldownMs: number
  /** 0 when the deny cache is off. */
  denyCacheMaxKeys: number
  /** Most keys each sync engine (write-back; lease and auto) holds per instance. */
  syncMaxKeys: number
  pool: RateLimiterOptions['pool']
  clock: () => number
  timers: Timers
  onStoreCall: StoreCallHook | undefined
}

const KNOWN_OPTIONS = new Set([
  'store',
  'policies',
  'timeout',
  'onStoreError',
  'instances',
  'breaker',
  'denyCache',
  'sync',
  'pool',
  'clock',
  'timers',
  'onStoreCall',
])

/** Validates every option (unknown ones too) and applies the defaults; throws a FloodgateError naming the field. */
export function resolveOptions(options: RateLimiterOptions): ResolvedOptions {
  if (options === null || typeof options !== 'object') {
    throw invalid('options', "expected an object like { policies: [{ algorithm: 'gcra', limit: 10, period: '1s' }] }")
  }
  for (const field of Object.keys(options)) {
    if (!KNOWN_OPTIONS.has(field)) {
      throw invalid(field, unknownOptionMessage(field, 'limiter', KNOWN_OPTIONS))
    }
  }
  const policies = resolvePolicies(options.policies)
  const pool = resolvePool(options.pool)
  if (pool === undefined && policies?.some((policy) => policy.mode === 'elastic')) {
    throw invalid('pool', 'elastic policies need a shared pool: pass pool: { limiter } (a RateLimiter whose policy is the spare capacity)')
  }
  return {
    store: resolveStore(options.store),
    policies,
    ...resolveTimeout(options.timeout),
    onStoreError: resolveOnStoreError(options.onStoreError),
    instances:
      options.instances === undefined ? 1 : wholeNumber(options.instances, 'instances', 'the number of processes sharing the limits'),
    ...resolveBreaker(options.breaker),
    denyCacheMaxKeys: resolveDenyCache(options.denyCache),
    syncMaxKeys: resolveSync(options.sync),
    pool,
    clock: resolveClock(options.clock),
    timers: resolveTimers(options.timers),
    onStoreCall: resolveStoreCallHook(options.onStoreCall),
  }
}

function resolvePolicies(value: unknown): Policy[] | undefined {
  if (value === undefined) return undefined
  // One policy given bare is the likeliest slip; say so rather than "give at least one policy".
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    throw invalid(
      'policies',
      "expected a list of policies: wrap the policy in [ ], e.g. policies: [{ algorithm: 'gcra', limit: 10, period: '1s' }]",
    )
  }
  return createPolicies(value as readonly PolicyOptions[], 'policies')
}

function resolveStore(store: unknown): Store | undefined {
  if (store === undefined) return undefined
  const candidate = store as Partial<Store> | null
  if (
    candidate === null ||
    typeof candidate !== 'object' ||
    typeof candidate.evaluate !== 'function' ||
    typeof candidate.reset !== 'function' ||
    typeof candidate.close !== 'function'
  ) {
    throw invalid('store', 'expected a Store such as new MemoryStore() or new RedisStore({ client })')
  }
  return candidate as Store
}

/** The adaptive timeout's bounds when none is given: see Timeouts. */
export const DEFAULT_TIMEOUT_MIN_MS = 100
export const DEFAULT_TIMEOUT_MAX_MS = 2_000

function resolveTimeout(value: unknown): { timeoutMs: number; timeoutMinMs: number } {
  if (value === undefined) return { timeoutMs: DEFAULT_TIMEOUT_MAX_MS, timeoutMinMs: DEFAULT_TIMEOUT_MIN_MS }
  // A duration is a fixed timeout: the caller asked for exactly that deadline.
  if (typeof value !== 'object' || value === null) {
    const ms = parseDuration(value as string | number, 'timeout')
    return { timeoutMs: ms, timeoutMinMs: ms }
  }
  const { min, max, ...rest } = value as { min?: unknown; max?: unknown }
  for (const field of Object.keys(rest)) throw invalid(`timeout.${field}`, 'unknown option; known options are min, max')
  const timeoutMinMs = min === undefined ? DEFAULT_TIMEOUT_MIN_MS : parseDuration(min as string | number, 'timeout.min')
  const timeoutMs =
    max === undefined ? Math.max(DEFAULT_TIMEOUT_MAX_MS, timeoutMinMs) : parseDuration(max as string | number, 'timeout.max')
  if (timeoutMinMs > timeoutMs) {
    throw invalid('timeout', `min (${timeoutMinMs}ms) is above max (${timeoutMs}ms); give min ≤ max, or one duration for a fixed timeout`)
  }
  return { timeoutMs, timeoutMinMs }
}

function resolveOnStoreError(value: unknown): OnStoreError {
  if (value === undefined) return 'open'
  if (value === 'open' || value === 'closed' || value === 'local') return value
  throw invalid('onStoreError', `unknown mode ${JSON.stringify(value)}; use 'open' (allow), 'closed' (deny) or 'local' (decide in-process)`)
}

function resolveBreaker(value: unknown): { breakerFailures: number; breakerCooldownMs: number } {
  if (value === undefined) return { breakerFailures: 5, breakerCooldownMs: 5_000 }
  if (value === null || typeof value !== 'object') {
    throw invalid('breaker', "expected an object like { failures: 5, cooldown: '5s' }")
  }
  const { failures, cooldown, ...rest } = value as { failures?: unknown; cooldown?: unknown }
  for (const field of Object.keys(rest)) throw invalid(`breaker.${field}`, 'unknown option; known options are failures, cooldown')
  return {
    breakerFailures:
      failures === undefined ? 5 : wholeNumber(failures, 'breaker.failures', 'consecutive failures before the store is skipped'),
    breakerCooldownMs: cooldown === undefined ? 5_000 : parseDuration(cooldown, 'breaker.cooldown'),
  }
}

function resolveSync(value: unknown): number {
  if (value === undefined) return 100_000
  // The sync mode is a policy's option; the limiter's `sync` only bounds the engines.
  if (typeof value === 'string')
    throw invalid('sync', `a sync mode is set on each policy: policies: [{ …, sync: '${value}' }]; the limiter's sync takes { maxKeys }`)
  if (value === null || typeof value !== 'object') throw invalid('sync', 'expected an object like { maxKeys: 100000 }')
  const { maxKeys, ...rest } = value as { maxKeys?: unknown }
  for (const field of Object.keys(rest)) throw invalid(`sync.${field}`, 'unknown option; known options are maxKeys')
  return maxKeys === undefined
    ? 100_000
    : wholeNumber(maxKeys, 'sync.maxKeys', 'the most keys write-back (or the lease engine) holds per instance')
}

function resolveDenyCache(value: unknown): number {
  if (value === undefined) return 10_000
  if (value === false) return 0
  if (value === null || typeof value !== 'object') {
    throw invalid('denyCache', 'expected false (off) or an object like { maxKeys: 10000 }')
  }
  const { maxKeys, ...rest } = value as { maxKeys?: unknown }
  for (const field of Object.keys(rest)) throw invalid(`denyCache.${field}`, 'unknown option; the only option is maxKeys')
  return maxKeys === undefined ? 10_000 : wholeNumber(maxKeys, 'denyCache.maxKeys', 'the most denied keys remembered')
}

function resolvePool(value: unknown): RateLimiterOptions['pool'] {
  if (value === undefined) return undefined
  const pool = value as { limiter?: { limit?: unknown }; key?: unknown } | null
  if (
    pool === null ||
    typeof pool !== 'object' ||
    pool.limiter === null ||
    typeof pool.limiter !== 'object' ||
    typeof pool.limiter.limit !== 'function'
  ) {
    throw invalid('pool.limiter', 'expected a RateLimiter (anything with limit(key, options)) holding the spare capacity')
  }
  if (pool.key !== undefined && (typeof pool.key !== 'string' || pool.key.length === 0)) {
    throw invalid('pool.key', 'must be a non-empty string')
  }
  return value as RateLimiterOptions['pool']
}

function resolveClock(value: unknown): () => number {
  if (value === undefined) return Date.now
  if (typeof value !== 'function') throw invalid('clock', 'must be a function returning milliseconds since the epoch')
  return value as () => number
}

function resolveTimers(value: unknown): Timers {
  if (value === undefined) return REAL_TIMERS
  const timers = value as Partial<Timers> | null
  if (timers === null || typeof timers !== 'object' || typeof timers.now !== 'function' || typeof timers.setTimeout !== 'function') {
    throw invalid('timers', 'expected { now(): number, setTimeout(callback, ms) } (a monotonic clock in ms and a timer)')
  }
  return timers as Timers
}

function wholeNumber(value: unknown, field: string, meaning: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) {
    throw invalid(field, `must be a whole number ≥ 1 (${meaning}), got ${JSON.stringify(value)}`)
  }
  return value
}

function invalid(field: string, message: string): FloodgateError {
  return new FloodgateError('INVALID_OPTION', `${field}: ${message}`)
}

function resolveStoreCallHook(value: unknown): StoreCallHook | undefined {
  if (value === undefined || typeof value === 'function') return value as StoreCallHook | undefined
  throw invalid('onStoreCall', 'expected a function (key, cost) => (failed) => void, called as each store call starts')
}
