// Settings of `floodgate serve` for how the gRPC port listens: TLS and mTLS, a unix socket instead of
// TCP, the connections' age, and how a flood of sockets is let in and closed. Their flags are
// GRPC_LISTEN_OPTIONS in serve-options.ts.

import { z } from 'zod'
import { CLOSE_BATCH } from './grpc-connections.js'
import type { GrpcTlsSettings } from './grpc-tls.js'
import { count, timerMs } from './setting-values.js'

/** What these options set, part of Settings. */
export interface GrpcListenSettings {
  /** TLS on the gRPC port (mTLS with a client CA); undefined: plaintext. */
  grpcTls: GrpcTlsSettings | undefined
  /** Listen on this unix socket instead of host:port (upstream's GRPC_UDS). */
  grpcSocket: string | undefined
  /** GOAWAY to a connection after this age, ±10% (upstream's GRPC_MAX_CONNECTION_AGE, default 24h). */
  grpcMaxConnectionAgeMs: number
  /** Then its running calls have this long before it is cut (GRPC_MAX_CONNECTION_AGE_GRACE, default 1h). */
  grpcMaxConnectionAgeGraceMs: number
  /** Plaintext: a connection gets its HTTP/2 session after the preface's SETTINGS frame (default), not its magic alone. */
  grpcAwaitSettings: boolean
  /** Most gRPC connections the deadline sweep closes per event-loop turn (default 64). */
  grpcCloseBatch: number
}

const path = z.string().min(1).optional()

/** The zod fields of these options, spread into the settings schema. */
export function grpcListenFields() {
  return {
    grpcTls: z.boolean().optional(),
    grpcTlsCert: path,
    grpcTlsKey: path,
    grpcClientCa: path,
    grpcClientSan: path,
    grpcSocket: path,
    grpcMaxConnectionAge: timerMs(24 * 3_600_000),
    grpcMaxConnectionAgeGrace: timerMs(3_600_000),
    noGrpcAwaitSettings: z.boolean().optional(),
    grpcCloseBatch: count(CLOSE_BATCH),
  }
}

interface Parsed {
  grpcTls?: boolean
  grpcTlsCert?: string
  grpcTlsKey?: string
  grpcClientCa?: string
  grpcClientSan?: string
  grpcSocket?: string
  grpcMaxConnectionAge: number
  grpcMaxConnectionAgeGrace: number
  noGrpcAwaitSettings?: boolean
  grpcCloseBatch: number
}

/** What does not go together, each with its reason (called from the schema's superRefine). */
export function grpcListenIssues(o: Partial<Parsed>, issue: (path: string, message: string) => void): void {
  if (o.grpcTls) {
    if (!o.grpcTlsCert) issue('grpcTlsCert', 'required with --grpc-tls: the PEM certificate chain of the server')
    if (!o.grpcTlsKey) issue('grpcTlsKey', 'required with --grpc-tls: the PEM private key of the certificate')
  } else {
    for (const name of ['grpcTlsCert', 'grpcTlsKey', 'grpcClientCa'] as const)
      if (o[name]) issue(name, 'only applies with --grpc-tls (GRPC_SERVER_USE_TLS=true)')
  }
  if (o.grpcClientSan && !o.grpcClientCa)
    issue('grpcClientSan', 'only applies with --grpc-client-ca: a SAN is checked on client certificates (mTLS)')
}

/** The parsed fields as Settings. */
export function grpcListenSettings(o: Parsed): GrpcListenSettings {
  return {
    grpcTls:
      o.grpcTls && o.grpcTlsCert && o.grpcTlsKey
        ? { certFile: o.grpcTlsCert, keyFile: o.grpcTlsKey, clientCaFile: o.grpcClientCa, clientSan: o.grpcClientSan }
        : undefined,
    grpcSocket: o.grpcSocket,
    grpcMaxConnectionAgeMs: o.grpcMaxConnectionAge,
    grpcMaxConnectionAgeGraceMs: o.grpcMaxConnectionAgeGrace,
    grpcAwaitSettings: !o.noGrpcAwaitSettings,
    grpcCloseBatch: o.grpcCloseBatch,
  }
}
