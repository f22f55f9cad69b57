// The service's store timeout: adaptive by default (the library's), fixed with --store-timeout alone,
// and bounded by --store-timeout-max, which envoyproxy/ratelimit's REDIS_TIMEOUT sets.

import type { RateLimiterOptions } from 'floodgate'

/** The library's adaptive bounds, which the service keeps unless told otherwise. */
const DEFAULT_MIN_MS = 100
const DEFAULT_MAX_MS = 2_000

/** The store timeout as settings hold it: equal bounds are a fixed timeout. */
export interface StoreTimeoutMs {
  /** The shortest adaptive wait (the whole timeout when fixed). */
  storeTimeoutMinMs: number
  /** The longest any decision waits for the store. */
  storeTimeoutMs: number
}

/**
 * The bounds from the two flags: neither, the library's adaptive default; --store-timeout alone, a
 * fixed timeout (as before); --store-timeout-max (or REDIS_TIMEOUT), adaptive from the default
 * minimum (or --store-timeout) up to it. A string is the reason the pair is refused.
 */
export function storeTimeoutBounds(fixedOrMin: number | undefined, max: number | undefined): StoreTimeoutMs | string {
  if (max === undefined) {
    if (fixedOrMin === undefined) return { storeTimeoutMinMs: DEFAULT_MIN_MS, storeTimeoutMs: DEFAULT_MAX_MS }
    return { storeTimeoutMinMs: fixedOrMin, storeTimeoutMs: fixedOrMin }
  }
  const min = fixedOrMin ?? Math.min(DEFAULT_MIN_MS, max)
  if (min > max) return `--store-timeout (${min}ms) is the shortest adaptive wait: give one no longer than --store-timeout-max (${max}ms)`
  return { storeTimeoutMinMs: min, storeTimeoutMs: max }
}

/** The limiter's `timeout` option for the bounds. */
export function limiterTimeout(bounds: StoreTimeoutMs): RateLimiterOptions['timeout'] {
  if (bounds.storeTimeoutMinMs === bounds.storeTimeoutMs) return bounds.storeTimeoutMs
  return { min: bounds.storeTimeoutMinMs, max: bounds.storeTimeoutMs }
}
