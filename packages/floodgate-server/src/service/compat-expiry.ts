// How long a shared counter (--compat-keys envoy) lives: the unit's seconds plus upstream's random jitter
// (EXPIRATION_JITTER_MAX_SECONDS), so the counters of one window do not all expire in the same second.

/** Upstream's default for EXPIRATION_JITTER_MAX_SECONDS (src/settings/settings.go). */
export const UPSTREAM_EXPIRY_JITTER_S = 300
export const MAX_EXPIRY_JITTER_S = 31_536_000

/** A counter's expiry in seconds, from its unit's seconds. */
export type CounterExpiry = (unitSeconds: number) => number

/**
 * The unit's seconds plus a whole number drawn uniformly from 0 to `maxSeconds - 1`, as upstream's
 * `JitterRand.Int63n(max)`; 0 adds nothing. `random` is Math.random's contract (tests pass their own).
 */
export function jitteredExpiry(maxSeconds: number, random: () => number = Math.random): CounterExpiry {
  if (maxSeconds <= 0) return (unitSeconds) => unitSeconds
  return (unitSeconds) => unitSeconds + Math.min(maxSeconds - 1, Math.floor(random() * maxSeconds))
}

/** Memcached reads an expiry above 30 days as a Unix time (its REALTIME_MAXDELTA). */
const MEMCACHED_RELATIVE_LIMIT_S = 2_592_000

/**
 * The expiry to send memcached for `seconds` from `nowMs`. Above 30 days memcached takes the number as a
 * Unix time, and one that far in the past expires the counter at once: a month's window plus jitter, or a
 * year's, would never count past one request. Upstream sends the seconds as they are; a counter it then
 * finds is still counted once in both fleets, since the key and its value are the same.
 */
export function memcachedExpiry(seconds: number, nowMs: number): number {
  return seconds <= MEMCACHED_RELATIVE_LIMIT_S ? seconds : Math.ceil(nowMs / 1000) + seconds
}
