// Settings of `floodgate serve` for its edges: health that follows the store, and the gRPC port's socket bounds.
// Their flags are GUARD_OPTIONS in serve-options.ts; settings.ts spreads these readers in.

import { z } from 'zod'
import { parseDuration } from 'floodgate'

/** What these options set, part of Settings. */
export interface GuardSettings {
  /**
   * gRPC health NOT_SERVING and `/healthcheck` 500 while the store is unreachable, so Envoy's health
   * checking moves traffic away (upstream's REDIS_HEALTH_CHECK_ACTIVE_CONNECTION). Off: health says
   * only whether the service runs, and `/readyz` alone reports the store (degraded).
   */
  healthCheckStore: boolean
  /** Most gRPC connections at once (default 10000); past it the one idle longest is shed, else the new one is refused. */
  grpcMaxConnections: number
  /** A gRPC connection with no call in flight this long is closed with GOAWAY (default 5m). */
  grpcIdleTimeoutMs: number
  /** A gRPC connection must complete the HTTP/2 preface (the client's SETTINGS) within this (default 10s). */
  grpcHandshakeTimeoutMs: number
  /** Pings closer together than this are strikes; the third ends the connection, as grpc-go's enforcement (default 5m). */
  grpcKeepaliveMinTimeMs: number
  /** Most concurrent calls per gRPC connection, advertised in SETTINGS and enforced (default 100). */
  grpcMaxConcurrentStreams: number
}

const wholeNumber = (fallback: number) =>
  z
    .string()
    .regex(/^[1-9]\d*$/, 'expected a whole number ≥ 1')
    .transform(Number)
    .refine(Number.isSafeInteger, 'too large')
    .optional()
    .transform((n) => n ?? fallback)

// Node's timers hold at most 2^31-1 ms (about 24.8 days); beyond that a timer fires at once.
const MAX_TIMER_MS = 2 ** 31 - 1

const duration = (fallback: number) =>
  z
    .string()
    .optional()
    .transform((value, ctx) => {
      if (value === undefined) return fallback
      try {
        const ms = parseDuration(/^\d+$/.test(value) ? Number(value) : value)
        if (ms <= MAX_TIMER_MS) return ms
        ctx.addIssue({ code: 'custom', message: 'at most 24d (2147483647 ms)' })
      } catch (error) {
        ctx.addIssue({ code: 'custom', message: (error as Error).message.replace(/^duration: /, '') })
      }
      return z.NEVER
    })

/** The zod fields of these options, spread into the settings schema. */
export function guardFields() {
  return {
    healthCheckStore: z.boolean().optional(),
    grpcMaxConnections: wholeNumber(10_000),
    grpcIdleTimeout: duration(5 * 60_000),
    grpcHandshakeTimeout: duration(10_000),
    grpcKeepaliveMinTime: duration(5 * 60_000),
    // HTTP/2's SETTINGS_MAX_CONCURRENT_STREAMS is a 31-bit field.
    grpcMaxConcurrentStreams: wholeNumber(100).refine((n) => n <= 2 ** 31 - 1, 'at most 2147483647'),
  }
}

/** The parsed fields as Settings. */
export function guardSettings(o: {
  healthCheckStore?: boolean
  grpcMaxConnections: number
  grpcIdleTimeout: number
  grpcHandshakeTimeout: number
  grpcKeepaliveMinTime: number
  grpcMaxConcurrentStreams: number
}): GuardSettings {
  return {
    healthCheckStore: o.healthCheckStore ?? false,
    grpcMaxConnections: o.grpcMaxConnections,
    grpcIdleTimeoutMs: o.grpcIdleTimeout,
    grpcHandshakeTimeoutMs: o.grpcHandshakeTimeout,
    grpcKeepaliveMinTimeMs: o.grpcKeepaliveMinTime,
    grpcMaxConcurrentStreams: o.grpcMaxConcurrentStreams,
  }
}
