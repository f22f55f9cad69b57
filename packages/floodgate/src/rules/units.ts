// The time units envoyproxy/ratelimit configs use, and the window each one means in milliseconds.

/** Units accepted in `rate_limit.unit`, as the Envoy `RateLimitUnit` enum names them. */
export const ENVOY_UNITS = ['SECOND', 'MINUTE', 'HOUR', 'DAY', 'WEEK', 'MONTH', 'YEAR'] as const

export type EnvoyUnit = (typeof ENVOY_UNITS)[number]

const DAY_MS = 86_400_000

/** Window length per unit. MONTH is 30 days and YEAR 365 days, as in envoyproxy/ratelimit. */
export const UNIT_MS: Readonly<Record<EnvoyUnit, number>> = Object.freeze({
  SECOND: 1_000,
  MINUTE: 60_000,
  HOUR: 3_600_000,
  DAY: DAY_MS,
  WEEK: 7 * DAY_MS,
  MONTH: 30 * DAY_MS,
  YEAR: 365 * DAY_MS,
})

/** Reads a unit case-insensitively (upstream accepts `second` and `SECOND`); `undefined` if unknown. */
export function parseUnit(text: string): EnvoyUnit | undefined {
  const upper = text.toUpperCase()
  return (ENVOY_UNITS as readonly string[]).includes(upper) ? (upper as EnvoyUnit) : undefined
}
