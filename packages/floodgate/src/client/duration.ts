// Reads the SDK's duration options ("100ms", "2s" or milliseconds) without importing the server's code.

const UNIT_MS = { ms: 1, s: 1_000, m: 60_000 } as const

/** A duration for SDK options: milliseconds, or a number with `ms`, `s` or `m`. */
export type ClientDuration = number | `${number}${keyof typeof UNIT_MS}`

/** Whole milliseconds of `value`; throws a TypeError naming `field` when it is not a positive duration. */
export function toMilliseconds(value: ClientDuration, field: string): number {
  const match = typeof value === 'string' ? /^(\d+(?:\.\d+)?)(ms|s|m)$/.exec(value.trim()) : null
  const ms = typeof value === 'number' ? value : match ? Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS] : NaN
  if (!Number.isFinite(ms) || ms <= 0) {
    throw new TypeError(`${field}: expected milliseconds or a duration like "100ms" or "2s", got ${JSON.stringify(value)}`)
  }
  return Math.round(ms)
}
