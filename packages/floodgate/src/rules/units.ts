// The time units of envoyproxy/ratelimit: the one table of their names, windows and wire numbers.

const DAY_MS = 86_400_000

// Each unit's window (MONTH is 30 days and YEAR 365 days, as in envoyproxy/ratelimit) and its number
// in Envoy's `RateLimitUnit` enum (0 is UNKNOWN, which no limit may use). In the order configs list them.
const UNITS = {
  SECOND: { ms: 1_000, number: 1 },
  MINUTE: { ms: 60_000, number: 2 },
  HOUR: { ms: 3_600_000, number: 3 },
  DAY: { ms: DAY_MS, number: 4 },
  WEEK: { ms: 7 * DAY_MS, number: 7 },
  MONTH: { ms: 30 * DAY_MS, number: 5 },
  YEAR: { ms: 365 * DAY_MS, number: 6 },
} as const

/** A unit as the Envoy `RateLimitUnit` enum names it. */
export type EnvoyUnit = keyof typeof UNITS

/** Units accepted in `rate_limit.unit` (any case in configs; exact on the wire). */
export const ENVOY_UNITS: readonly EnvoyUnit[] = Object.freeze(Object.keys(UNITS) as EnvoyUnit[])

/** Window length per unit, in milliseconds. */
export const UNIT_MS: Readonly<Record<EnvoyUnit, number>> = Object.freeze(mapUnits((unit) => UNITS[unit].ms))

/** Each unit's number in Envoy's `RateLimitUnit` enum, for the gRPC wire. */
export const UNIT_NUMBER: Readonly<Record<EnvoyUnit, number>> = Object.freeze(mapUnits((unit) => UNITS[unit].number))

/** Reads a unit case-insensitively (upstream accepts `second` and `SECOND`); `undefined` if unknown. */
export function parseUnit(text: string): EnvoyUnit | undefined {
  const upper = text.toUpperCase()
  return isEnvoyUnit(upper) ? upper : undefined
}

/** True for a unit's exact name (as the wire carries it); a name such as `toString` is not one. */
export function isEnvoyUnit(text: string): text is EnvoyUnit {
  return (ENVOY_UNITS as readonly string[]).includes(text)
}

/** The unit of an enum number; `undefined` for UNKNOWN (0) and numbers the enum does not have. */
export function unitOfNumber(value: number): EnvoyUnit | undefined {
  return ENVOY_UNITS.find((unit) => UNITS[unit].number === value)
}

function mapUnits(value: (unit: EnvoyUnit) => number): Record<EnvoyUnit, number> {
  const out = {} as Record<EnvoyUnit, number>
  for (const unit of ENVOY_UNITS) out[unit] = value(unit)
  return out
}
