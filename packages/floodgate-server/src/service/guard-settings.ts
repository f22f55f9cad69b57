// Settings of `floodgate serve` for its edges: health that follows the store, and the gRPC port's socket bounds.
// Their flags are GUARD_OPTIONS in serve-options.ts; settings.ts spreads these readers in.

import { z } from 'zod'
import { count, timerMs } from './setting-values.js'

/** What these options set, part of Settings. */
export interface GuardSettings {
  /**
   * gRPC health NOT_SERVING and `/healthcheck` 500 while the store is unreachable, so Envoy's health
   * checking moves traffic away (upstream's REDIS_HEALTH_CHECK_ACTIVE_CONNECTION). Off: health says
   * only whether the service runs, and `/readyz` alone reports the store (degraded).
   */
  healthCheckStore: boolean
  /**
   * gRPC health NOT_SERVING and `/healthcheck` 500 until the rules source has delivered a config
   * (upstream's HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED). Only an xDS source can start without one:
   * rules from files load before the service listens, or it does not start.
   */
  healthRequiresRules: boolean
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

/** The zod fields of these options, spread into the settings schema. */
export function guardFields() {
  return {
    healthCheckStore: z.boolean().optional(),
    healthRequiresRules: z.boolean().optional(),
    grpcMaxConnections: count(10_000),
    grpcIdleTimeout: timerMs(5 * 60_000),
    grpcHandshakeTimeout: timerMs(10_000),
    grpcKeepaliveMinTime: timerMs(5 * 60_000),
    // HTTP/2's SETTINGS_MAX_CONCURRENT_STREAMS is a 31-bit field.
    grpcMaxConcurrentStreams: count(100).refine((n) => n <= 2 ** 31 - 1, 'at most 2147483647'),
  }
}

/** The parsed fields as Settings. */
export function guardSettings(o: {
  healthCheckStore?: boolean
  healthRequiresRules?: boolean
  grpcMaxConnections: number
  grpcIdleTimeout: number
  grpcHandshakeTimeout: number
  grpcKeepaliveMinTime: number
  grpcMaxConcurrentStreams: number
}): GuardSettings {
  return {
    healthCheckStore: o.healthCheckStore ?? false,
    healthRequiresRules: o.healthRequiresRules ?? false,
    grpcMaxConnections: o.grpcMaxConnections,
    grpcIdleTimeoutMs: o.grpcIdleTimeout,
    grpcHandshakeTimeoutMs: o.grpcHandshakeTimeout,
    grpcKeepaliveMinTimeMs: o.grpcKeepaliveMinTime,
    grpcMaxConcurrentStreams: o.grpcMaxConcurrentStreams,
  }
}
