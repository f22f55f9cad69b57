// How the service reaches Redis: redis://, rediss:// or unix:// URLs, Cluster or Sentinel nodes, and TLS files, as ioredis options.

import { rootCertificates, type ConnectionOptions } from 'node:tls'
import { authOptions } from './redis-auth-settings.js'
import type { StoreSettings } from './settings-types.js'

/** TLS to Redis, read once at start (as upstream reads REDIS_TLS_* once); one set for every Redis connection. */
export interface RedisTlsSettings {
  /** TLS to Cluster nodes and to Sentinels and their master (host:port lists); a URL says it with rediss://. */
  nodes: boolean
  /** PEM CA certificates trusted besides Node's own roots (as upstream adds REDIS_TLS_CACERT to the system pool). */
  ca: string | undefined
  /** PEM client certificate and key, for a Redis that requires one (`tls-auth-clients yes`). */
  cert: string | undefined
  key: string | undefined
  /** Verify the server's chain, not its name (upstream's REDIS_TLS_SKIP_HOSTNAME_VERIFICATION). */
  skipHostnameVerification: boolean
}

/** No TLS beyond what a rediss:// URL asks for, with Node's defaults. */
export const NO_REDIS_TLS: RedisTlsSettings = {
  nodes: false,
  ca: undefined,
  cert: undefined,
  key: undefined,
  skipHostnameVerification: false,
}

/** What a RedisStore (or an ioredis client made alike) is given: `url` with `redis` options, `redis` alone, or a `cluster`. */
export interface RedisConnectOptions {
  url?: string
  redis?: Record<string, unknown>
  cluster?: readonly { host: string; port: number }[]
  clusterOptions?: {
    redisOptions: Record<string, unknown>
    dnsLookup?: (name: string, done: (error: null, address: string) => void) => void
  }
}

/** Node TLS options for ioredis's `tls` (and `sentinelTLS`). */
export function tlsOptions(tls: RedisTlsSettings): ConnectionOptions {
  return {
    // Node's `ca` replaces its roots; upstream's CA file extends the system pool, so both are kept.
    ...(tls.ca !== undefined && { ca: [...rootCertificates, tls.ca] }),
    ...(tls.cert !== undefined && { cert: tls.cert, key: tls.key }),
    // The chain is still verified (rejectUnauthorized stays true); only the name check is skipped.
    ...(tls.skipHostnameVerification && { checkServerIdentity: () => undefined }),
  }
}

/** Whether `url` names a unix socket (`unix:///path/to/redis.sock`). */
export function isUnixUrl(url: string): boolean {
  return url.startsWith('unix:')
}

/**
 * Options for one Redis given by URL. `unix:///path?username=…&password=…&db=N` becomes ioredis's
 * `path` (ioredis takes a socket as a bare path, which the store's URL check would not pass).
 */
export function urlConnectOptions(url: string, tls: RedisTlsSettings): RedisConnectOptions {
  if (isUnixUrl(url)) {
    const parsed = new URL(url)
    const query = parsed.searchParams
    const db = query.get('db')
    return {
      redis: {
        path: decodeURIComponent(parsed.pathname),
        ...(query.get('username') !== null && { username: query.get('username') }),
        ...(query.get('password') !== null && { password: query.get('password') }),
        ...(db !== null && { db: Number(db) }),
      },
    }
  }
  return url.startsWith('rediss:') ? { url, redis: { tls: tlsOptions(tls) } } : { url }
}

/** Options for the service's store: one Redis, a Cluster or Sentinels. */
export function storeConnectOptions(
  store: Exclude<StoreSettings, { kind: 'memory' | 'memcached' }>,
  tls: RedisTlsSettings,
): RedisConnectOptions {
  if (store.kind === 'redis') return urlConnectOptions(store.url, tls)
  const nodeTls = tls.nodes ? { tls: tlsOptions(tls) } : {}
  if (store.kind === 'cluster') {
    // ioredis resolves the names of the nodes it is given to IPs and connects to those, so TLS would
    // check a certificate for `redis-0.redis` against 10.1.2.3 and refuse it; as upstream's dialer, the
    // name given is the name checked. The nodes CLUSTER SLOTS announces are checked against what it
    // announces (their IPs, or names with cluster-preferred-endpoint-type hostname): see docs/redis.md.
    const redisOptions = { ...nodeTls, ...authOptions(store.auth) }
    const clusterOptions = tls.nodes ? { redisOptions, dnsLookup: keepName } : { redisOptions }
    return { cluster: store.nodes, clusterOptions }
  }
  return {
    redis: {
      sentinels: store.sentinels,
      name: store.name,
      ...authOptions(store.auth),
      ...(store.sentinelAuth?.username !== undefined && { sentinelUsername: store.sentinelAuth.username }),
      ...(store.sentinelAuth !== undefined && { sentinelPassword: store.sentinelAuth.password }),
      // As upstream: the Sentinels and the master they name are both reached over TLS.
      ...(tls.nodes && { ...nodeTls, sentinelTLS: tlsOptions(tls), enableTLSForSentinelMode: true }),
    },
  }
}

/** ioredis's `dnsLookup` that leaves a node's name as it is (Node resolves it when it connects). */
function keepName(name: string, done: (error: null, address: string) => void): void {
  done(null, name)
}

/** The TLS options `connect` uses, if any (a URL's, a Cluster node's, a Sentinel master's). */
function tlsOf(connect: RedisConnectOptions): ConnectionOptions | undefined {
  return (connect.redis?.tls ?? connect.clusterOptions?.redisOptions.tls) as ConnectionOptions | undefined
}

/** What a connection error means for the user, by its code, with the option to change; undefined when it says enough itself. */
function hintFor(error: Error & { code?: string }, connect: RedisConnectOptions): string | undefined {
  const code = error.code ?? ''
  const tls = tlsOf(connect)
  // Under TLS 1.3 a server that requires a client certificate verifies it after the client's side
  // of the handshake is done: a client without one sees the connection reset, not an alert.
  const resetWithoutCert = tls !== undefined && tls.cert === undefined && /ECONNRESET|EPIPE/.test(code)
  if (resetWithoutCert || /CERTIFICATE_REQUIRED|ALERT_BAD_CERTIFICATE|ALERT_UNKNOWN_CA|HANDSHAKE_FAILURE/.test(code))
    return (
      'Redis refused the TLS connection: it requires a client certificate its CA signed; ' +
      'give --redis-tls-cert and --redis-tls-key (REDIS_TLS_CLIENT_CERT, REDIS_TLS_CLIENT_KEY)'
    )
  if (/UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED_CERT|UNABLE_TO_GET_ISSUER_CERT|CERT_SIGNATURE_FAILURE|CERT_UNTRUSTED/.test(code))
    return "Redis's certificate is not signed by a trusted CA: give that CA with --redis-tls-ca (REDIS_TLS_CACERT)"
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID')
    return (
      "Redis's certificate is for another name: connect by a name it holds, " +
      'or pass --redis-tls-skip-hostname-verification (REDIS_TLS_SKIP_HOSTNAME_VERIFICATION)'
    )
  if (connect.redis?.path !== undefined && /ENOENT|EACCES|ECONNREFUSED/.test(code))
    return `cannot open the unix socket ${String(connect.redis.path)}: check the path in the unix:// URL and its permissions`
  return undefined
}

/** Logs a Redis connection error: what it means for the user, and the client's own message. */
export type RedisErrorLog = (message: string, cause: string) => void

/** A listener of an ioredis client's events (Redis, Cluster). */
export interface Emitter {
  on(event: string, listener: (error: Error) => void): unknown
}

/** What `connectionErrorReport` makes: it hears errors from the client's events and from its streams. */
export interface ConnectionErrorReport {
  /** Reports an error (once per message until the client is ready again). */
  heard(error: Error): void
  /** Listens to the client's own error events, and forgets what was reported when it is ready. */
  watch(client: Emitter): void
}

/**
 * Reports the connection errors of a client made from `connect` to `report`, each distinct one
 * once until the client is ready again: ioredis retries every 200 ms, and a refused certificate
 * fails alike each time. Made before the client, so that its TLS streams can report to it (see
 * withSteadyTls: a Cluster hides its nodes' TLS errors).
 */
export function connectionErrorReport(connect: RedisConnectOptions, target: string, report: RedisErrorLog): ConnectionErrorReport {
  const seen = new Set<string>()
  const heard = (error: Error) => {
    if (seen.has(error.message)) return
    seen.add(error.message)
    const hint = hintFor(error, connect)
    report(`cannot connect to ${target}${hint === undefined ? '' : `: ${hint}`}`, error.message)
  }
  return {
    heard,
    watch(client) {
      client.on('error', heard)
      // A Cluster reports a node's failure as 'node error' (its own 'error' only once all nodes failed).
      client.on('node error', heard)
      client.on('ready', () => seen.clear())
    },
  }
}
