// Durations: strings like "500ms", "30s", "1m", "1h", "1d", "1w" at the edges; milliseconds inside.

import { FloodgateError } from './errors.js'

/** A duration as users write it: milliseconds, or a number with a unit (`ms`, `s`, `m`, `h`, `d`, `w`). */
export type Duration = number | `${number}${DurationUnit}`
export type DurationUnit = 'ms' | 's' | 'm' | 'h' | 'd' | 'w'

const UNIT_MS: Record<DurationUnit, number> = {
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
  w: 604_800_000,
}

const PATTERN = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)\s*$/

/**
 * Parses a duration into whole milliseconds. `field` names the option in the error message.
 * Fractions are allowed ("1.5s") but the result must be a positive whole number of milliseconds.
 */
export function parseDuration(value: unknown, field = 'duration'): number {
  let ms: number
  if (typeof value === 'number') {
    ms = value
  } else if (typeof value === 'string') {
    const match = PATTERN.exec(value)
    if (!match) {
      throw new FloodgateError(
        'INVALID_DURATION',
        `${field}: "${value}" is not a duration; write a number of milliseconds or a number with a unit, ` +
          'e.g. "500ms", "30s", "1m", "1h", "1d", "1w"',
      )
    }
    ms = decimalTimes(match[1], UNIT_MS[match[2] as DurationUnit])
  } else {
    throw new FloodgateError(
      'INVALID_DURATION',
      `${field}: expected a duration such as "30s" or a number of milliseconds, got ${describe(value)}`,
    )
  }
  if (!Number.isFinite(ms) || ms <= 0) {
    throw new FloodgateError('INVALID_DURATION', `${field}: must be greater than 0, got ${describe(value)}`)
  }
  if (!Number.isInteger(ms)) {
    throw new FloodgateError('INVALID_DURATION', `${field}: must be a whole number of milliseconds, got ${describe(value)}`)
  }
  if (ms > Number.MAX_SAFE_INTEGER) {
    throw new FloodgateError(
      'INVALID_DURATION',
      `${field}: must be at most ${Number.MAX_SAFE_INTEGER}ms (about 285,000 years), got ${describe(value)}`,
    )
  }
  return ms
}

// "0.07" × 1000 is 70.00000000000001 in binary floating point: scale the digits as a whole number
// first and divide by the power of ten once, which is exact whenever the result is whole.
function decimalTimes(decimal: string, unitMs: number): number {
  const [whole, fraction = ''] = decimal.split('.')
  return (Number(whole + fraction) * unitMs) / 10 ** fraction.length
}

/** Formats milliseconds the shortest exact way ("1m", "90s", "1500ms"), for messages and headers. */
export function formatDuration(ms: number): string {
  for (const unit of ['w', 'd', 'h', 'm', 's'] as const) {
    if (ms >= UNIT_MS[unit] && ms % UNIT_MS[unit] === 0) return `${ms / UNIT_MS[unit]}${unit}`
  }
  return `${ms}ms`
}

function describe(value: unknown): string {
  return typeof value === 'string' ? `"${value}"` : String(value)
}
