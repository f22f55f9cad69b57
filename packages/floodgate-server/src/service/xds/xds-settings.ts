// CONFIG_TYPE=GRPC_XDS_SOTW and its CONFIG_GRPC_XDS_* / XDS_CLIENT_* variables, read as envoyproxy/ratelimit reads them.

import { FloodgateError } from 'floodgate'

/** Where and how to fetch rules from an xDS management server (upstream's variables, same defaults). */
export interface XdsSettings {
  /** CONFIG_GRPC_XDS_SERVER_URL: host:port of the management server (default localhost:18000). */
  serverUrl: string
  /** CONFIG_GRPC_XDS_NODE_ID: the node the server keeps snapshots for (default "default"). */
  nodeId: string
  /** CONFIG_GRPC_XDS_NODE_METADATA: `key=value,key=value`, sent as the node's metadata. */
  nodeMetadata: Record<string, string>
  /** CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS: `name:value,name:value`, sent as metadata of the stream. */
  headers: Record<string, string>
  /** CONFIG_GRPC_XDS_SERVER_USE_TLS and its files; undefined for a plaintext connection. */
  tls?: XdsTlsSettings
  /** XDS_CLIENT_BACKOFF_*: waits between reconnects. */
  backoff: XdsBackoff
  /** XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES: the largest response accepted; undefined: grpc-js's default (4 MiB). */
  maxMessageBytes?: number
}

export interface XdsTlsSettings {
  /** CONFIG_GRPC_XDS_SERVER_TLS_CACERT: the CA the server's certificate must chain to; default the system's. */
  caCert?: string
  /** CONFIG_GRPC_XDS_CLIENT_TLS_CERT and _KEY: a client certificate, for a server that requires mTLS. */
  clientCert?: string
  clientKey?: string
  /** CONFIG_GRPC_XDS_SERVER_TLS_SAN: the name the server's certificate must carry, instead of the URL's host. */
  san?: string
}

export interface XdsBackoff {
  initialMs: number
  maxMs: number
  /** Each wait is shortened by up to this fraction at random when `jitter` is on (0.5: 50–100% of it). */
  randomFactor: number
  jitter: boolean
}

/**
 * Reads the xDS settings from `env` when CONFIG_TYPE=GRPC_XDS_SOTW; undefined for CONFIG_TYPE=FILE
 * or unset. Throws FloodgateError (INVALID_OPTION) naming the variable when a value is malformed.
 */
export function readXdsSettings(env: NodeJS.ProcessEnv): XdsSettings | undefined {
  const type = (env.CONFIG_TYPE ?? '').toUpperCase()
  if (type === '' || type === 'FILE') return undefined
  if (type !== 'GRPC_XDS_SOTW') {
    throw new FloodgateError('INVALID_OPTION', `CONFIG_TYPE=${env.CONFIG_TYPE}: expected FILE or GRPC_XDS_SOTW`)
  }
  const value = (name: string) => (env[name] === '' ? undefined : env[name])
  const useTls = /^(1|t|true)$/i.test(value('CONFIG_GRPC_XDS_SERVER_USE_TLS') ?? '')
  const clientCert = value('CONFIG_GRPC_XDS_CLIENT_TLS_CERT')
  const clientKey = value('CONFIG_GRPC_XDS_CLIENT_TLS_KEY')
  if (useTls && (clientCert === undefined) !== (clientKey === undefined)) {
    throw new FloodgateError(
      'INVALID_OPTION',
      'CONFIG_GRPC_XDS_CLIENT_TLS_CERT and CONFIG_GRPC_XDS_CLIENT_TLS_KEY: set both (a client certificate and its key) or neither',
    )
  }
  const initialMs = durationMs(env, 'XDS_CLIENT_BACKOFF_INITIAL_INTERVAL', 10_000)
  const maxMs = durationMs(env, 'XDS_CLIENT_BACKOFF_MAX_INTERVAL', 60_000)
  const randomFactor = Number(value('XDS_CLIENT_BACKOFF_RANDOM_FACTOR') ?? 0.5)
  if (!(randomFactor >= 0 && randomFactor <= 1)) {
    throw new FloodgateError('INVALID_OPTION', 'XDS_CLIENT_BACKOFF_RANDOM_FACTOR: expected a number from 0 to 1')
  }
  const maxBytes = value('XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES')
  if (maxBytes !== undefined && !/^[1-9][0-9]*$/.test(maxBytes)) {
    throw new FloodgateError('INVALID_OPTION', `XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES=${maxBytes}: expected a positive whole number of bytes`)
  }
  return {
    serverUrl: value('CONFIG_GRPC_XDS_SERVER_URL') ?? 'localhost:18000',
    nodeId: value('CONFIG_GRPC_XDS_NODE_ID') ?? 'default',
    nodeMetadata: pairs(value('CONFIG_GRPC_XDS_NODE_METADATA'), '='),
    headers: pairs(value('CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS'), ':'),
    tls: useTls
      ? { caCert: value('CONFIG_GRPC_XDS_SERVER_TLS_CACERT'), clientCert, clientKey, san: value('CONFIG_GRPC_XDS_SERVER_TLS_SAN') }
      : undefined,
    backoff: {
      initialMs,
      maxMs: Math.max(maxMs, initialMs),
      randomFactor,
      jitter: !/^(0|f|false)$/i.test(value('XDS_CLIENT_BACKOFF_JITTER') ?? ''),
    },
    maxMessageBytes: maxBytes === undefined ? undefined : Number(maxBytes),
  }
}

/** `a<sep>1,b<sep>2` as upstream splits it: entries without the separator are skipped. */
function pairs(text: string | undefined, separator: string): Record<string, string> {
  const out: Record<string, string> = {}
  for (const entry of (text ?? '').split(',')) {
    const at = entry.indexOf(separator)
    if (at > 0) out[entry.slice(0, at).trim()] = entry.slice(at + 1).trim()
  }
  return out
}

const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 }

/** A Go duration as upstream writes them ("10s", "1m30s", "500ms"). */
function durationMs(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const text = env[name]
  if (text === undefined || text === '') return fallback
  const parts = [...text.matchAll(/([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)/g)]
  if (parts.length === 0 || parts.map((part) => part[0]).join('') !== text) {
    throw new FloodgateError('INVALID_OPTION', `${name}=${text}: expected a duration such as 500ms, 10s or 1m`)
  }
  return parts.reduce((sum, part) => sum + Number(part[1]) * UNIT_MS[part[2]], 0)
}
