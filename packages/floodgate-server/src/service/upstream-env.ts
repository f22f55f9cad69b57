// envoyproxy/ratelimit's environment variables, read into Floodgate's, so a deployment manifest written for it works unchanged.

import { join } from 'node:path'
import { FloodgateError } from 'floodgate'
import { readUpstreamTelemetry } from './upstream-telemetry-env.js'

/** The environment with upstream's variables translated, and what was accepted without effect (to log at start). */
export interface UpstreamEnvironment {
  env: NodeJS.ProcessEnv
  notes: string[]
}

/** Upstream variable → Floodgate variable of the same meaning (a Floodgate variable, when set, wins). */
const SAME_MEANING: readonly [string, string][] = [
  ['PORT', 'FLOODGATE_HTTP_PORT'],
  ['GRPC_PORT', 'FLOODGATE_GRPC_PORT'],
  ['NEAR_LIMIT_RATIO', 'FLOODGATE_NEAR_LIMIT_RATIO'],
  ['CACHE_KEY_PREFIX', 'FLOODGATE_REDIS_PREFIX'],
  // Upstream's own key layout, when Floodgate shares its counters (--compat-keys envoy).
  ['CACHE_KEY_PREFIX', 'FLOODGATE_COMPAT_PREFIX'],
  ['LIMIT_RESPONSE_HEADERS_ENABLED', 'FLOODGATE_GRPC_RESPONSE_HEADERS'],
  ['USE_PROMETHEUS', 'FLOODGATE_UPSTREAM_METRICS'],
  ['LIMIT_LIMIT_HEADER', 'FLOODGATE_LIMIT_HEADER'],
  ['LIMIT_REMAINING_HEADER', 'FLOODGATE_REMAINING_HEADER'],
  ['LIMIT_RESET_HEADER', 'FLOODGATE_RESET_HEADER'],
  ['STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT', 'FLOODGATE_STOP_INCREMENT_WHEN_OVER_LIMIT'],
  ['SHADOW_MODE', 'FLOODGATE_SHADOW_MODE'],
  ['QUOTA_MODE', 'FLOODGATE_QUOTA_MODE'],
  ['RESPONSE_DYNAMIC_METADATA', 'FLOODGATE_RESPONSE_DYNAMIC_METADATA'],
  // Upstream's longest wait for Redis: the adaptive store timeout's maximum (it waits less while the store answers fast).
  ['REDIS_TIMEOUT', 'FLOODGATE_STORE_TIMEOUT_MAX'],
  ['GRPC_UDS', 'FLOODGATE_GRPC_SOCKET'],
  ['MERGE_DOMAIN_CONFIG', 'FLOODGATE_MERGE_DOMAINS'],
  // Shared counters only; Floodgate's own records expire as their policy says (docs/envoy.md).
  ['EXPIRATION_JITTER_MAX_SECONDS', 'FLOODGATE_COMPAT_EXPIRY_JITTER'],
]

/** Accepted and ignored: they tune upstream's own machinery, and Floodgate answers the same without them. */
const HARMLESS: Readonly<Record<string, string>> = {
  PROMETHEUS_ADDR: 'metrics are served on the HTTP port, GET /metrics',
  PROMETHEUS_PATH: 'metrics are served on the HTTP port, GET /metrics',
  PROMETHEUS_MAPPER_YAML: 'FLOODGATE_UPSTREAM_METRICS=true exports upstream default mapping',
  PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS: 'latency is floodgate_decision_duration_seconds',
  DEBUG_HOST: 'no debug listener; /admin and /metrics are on the HTTP port',
  DEBUG_PORT: 'no debug listener; /admin and /metrics are on the HTTP port',
  RUNTIME_WATCH_ROOT: 'the rules directory is watched, symlink swaps (Kubernetes ConfigMaps) included',
  RUNTIME_IGNOREDOTFILES: 'dot files are always skipped',
  LOCAL_CACHE_SIZE_IN_BYTES: 'upstream-format rules are counted exactly in the store; limits: rules have a bounded deny cache',
  REDIS_POOL_SIZE: 'requests to Redis are batched on one connection',
  REDIS_PIPELINE_WINDOW: 'requests to Redis are batched per event-loop turn',
  REDIS_PIPELINE_LIMIT: 'requests to Redis are batched per event-loop turn',
  REDIS_CLUSTER_PIPELINE_PARALLELISM: 'requests to Redis are batched per slot',
  REDIS_POOL_ON_EMPTY_BEHAVIOR: 'requests to Redis are batched on one connection',
  REDIS_PERSECOND_POOL_SIZE: 'requests to Redis are batched on one connection',
  REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR: 'requests to Redis are batched on one connection',
  REDIS_PERSECOND_PIPELINE_WINDOW: 'requests to Redis are batched per event-loop turn',
  REDIS_PERSECOND_PIPELINE_LIMIT: 'requests to Redis are batched per event-loop turn',
  REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM: 'the per-second Redis is a single server',
  REDIS_PERSECOND_SENTINEL_AUTH: 'the per-second Redis is a single server (REDIS_PERSECOND_TYPE=single)',
  REDIS_PERSECOND_TIMEOUT: 'the store timeout (REDIS_TIMEOUT, --store-timeout-max) bounds every Redis call, per-second ones included',
  REDIS_STARTUP_INITIAL_INTERVAL: 'the Redis client reconnects by itself',
  REDIS_STARTUP_MAX_INTERVAL: 'the Redis client reconnects by itself',
  REDIS_STARTUP_MAX_ELAPSED_TIME: 'the Redis client reconnects by itself',
  CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL: 'the xDS client paces every reconnect by XDS_CLIENT_BACKOFF_*',
  MEMCACHE_MAX_IDLE_CONNS: 'the memcached client keeps one connection per server and pipelines on it',
}

/** Refused when set to anything but upstream's default: Floodgate cannot do what they ask, and answers would differ. */
const REFUSED: readonly { name: string; isDefault: (value: string, env: NodeJS.ProcessEnv) => boolean; reason: string }[] = [
  {
    name: 'BACKEND_TYPE',
    isDefault: (v) => /^(redis|memcache)$/i.test(v),
    reason: 'only redis and memcache are supported (or neither: the embedded memory store)',
  },
  {
    name: 'CONFIG_TYPE',
    isDefault: (v) => /^(FILE|GRPC_XDS_SOTW)$/i.test(v),
    reason: 'rules come from files (FILE) or an xDS management server (GRPC_XDS_SOTW)',
  },
  // With xDS the service starts before its first config whatever this says (Envoy Gateway sets it);
  // rules from files must load, since a limiter that starts without them limits nothing.
  {
    name: 'FORCE_START_WITHOUT_INITIAL_CONFIG',
    isDefault: (v, env) => isFalse(v) || /^GRPC_XDS_SOTW$/i.test(env.CONFIG_TYPE ?? ''),
    reason: 'rules from files must load for the service to start (with CONFIG_TYPE=GRPC_XDS_SOTW it starts before the first config)',
  },
]

function isFalse(value: string): boolean {
  return /^(0|false|f)$/i.test(value)
}

function isTrue(value: string | undefined): boolean {
  return value !== undefined && /^(1|true|t)$/i.test(value)
}

/**
 * Reads envoyproxy/ratelimit's variables from `env` into the Floodgate variables of the same
 * meaning (when those are not set themselves). Variables that tune only upstream's machinery are
 * accepted and listed in `notes`; ones asking for something Floodgate cannot do throw
 * FloodgateError (INVALID_OPTION) with the reason.
 */
export function readUpstreamEnvironment(env: NodeJS.ProcessEnv): UpstreamEnvironment {
  const out: NodeJS.ProcessEnv = { ...env }
  const notes: string[] = []
  const given = (name: string) => env[name] !== undefined && env[name] !== ''
  const set = (name: string, value: string) => {
    if (!given(name)) out[name] = value
  }
  for (const { name, isDefault, reason } of REFUSED) {
    const value = env[name]
    if (value !== undefined && !isDefault(value, env))
      throw new FloodgateError('INVALID_OPTION', `${name}=${value}: not supported by Floodgate: ${reason}`)
  }
  for (const [name, note] of Object.entries(HARMLESS)) {
    if (given(name)) notes.push(`${name} is accepted and ignored: ${note}`)
  }
  for (const [upstream, own] of SAME_MEANING) {
    if (given(upstream)) set(own, env[upstream] as string)
  }

  const host = env.HOST || undefined
  const grpcHost = env.GRPC_HOST || undefined
  if (host !== undefined && grpcHost !== undefined && host !== grpcHost) {
    throw new FloodgateError(
      'INVALID_OPTION',
      `HOST=${host} and GRPC_HOST=${grpcHost}: Floodgate serves HTTP and gRPC on one address; give them the same value`,
    )
  }
  if (host ?? grpcHost) set('FLOODGATE_HOST', (host ?? grpcHost) as string)

  readUpstreamTelemetry(env, set, notes)
  readGrpcListen(env, set, notes)

  if (given('LOG_LEVEL')) set('FLOODGATE_LOG_LEVEL', logLevelOf(env.LOG_LEVEL as string))
  // Upstream logs JSON for `json` and logrus's text lines for anything else; pretty is Floodgate's text.
  if (given('LOG_FORMAT')) set('FLOODGATE_LOG_FORMAT', /^json$/i.test(env.LOG_FORMAT as string) ? 'json' : 'pretty')

  if (given('RUNTIME_ROOT') || given('RUNTIME_SUBDIRECTORY')) {
    // Upstream reads the rules from <root>/<subdirectory>/<app directory>.
    const root = env.RUNTIME_ROOT || '/srv/runtime_data/current'
    set('FLOODGATE_CONFIG', join(root, env.RUNTIME_SUBDIRECTORY ?? '', env.RUNTIME_APPDIRECTORY || 'config'))
  }

  if (/^memcache$/i.test(env.BACKEND_TYPE ?? '')) {
    // As upstream: the memcache backend ignores every REDIS_* setting.
    readMemcache(env, set, given, notes)
    if (given('REDIS_URL')) notes.push('REDIS_URL is ignored with BACKEND_TYPE=memcache, as upstream ignores it')
    if (isTrue(env.REDIS_PERSECOND)) notes.push('REDIS_PERSECOND is ignored with BACKEND_TYPE=memcache, as upstream ignores it')
    if (given('REDIS_HEALTH_CHECK_ACTIVE_CONNECTION'))
      notes.push('REDIS_HEALTH_CHECK_ACTIVE_CONNECTION is ignored with BACKEND_TYPE=memcache, as upstream ignores it')
    return { env: out, notes }
  }
  for (const name of ['MEMCACHE_HOST_PORT', 'MEMCACHE_SRV'])
    if (given(name)) notes.push(`${name} is ignored without BACKEND_TYPE=memcache, as upstream ignores it`)
  if (given('REDIS_URL')) readRedis(env, set)
  // Health follows the store: NOT_SERVING and /healthcheck 500 while Redis is unreachable.
  if (given('REDIS_HEALTH_CHECK_ACTIVE_CONNECTION')) set('FLOODGATE_HEALTH_CHECK_STORE', env.REDIS_HEALTH_CHECK_ACTIVE_CONNECTION as string)
  if (given('HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED'))
    set('FLOODGATE_HEALTH_REQUIRES_RULES', env.HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED as string)
  if (isTrue(env.REDIS_PERSECOND)) readRedisPerSecond(env, set)
  readRedisTls(env, set, notes)
  return { env: out, notes }
}

/**
 * BACKEND_TYPE=memcache: the servers from MEMCACHE_HOST_PORT or, looked up (and again every
 * MEMCACHE_SRV_REFRESH), from the SRV record MEMCACHE_SRV; upstream refuses both at once, and so does
 * the settings schema. MEMCACHE_TLS=true → --memcache-tls, and its files (read only then, as upstream).
 */
function readMemcache(
  env: NodeJS.ProcessEnv,
  set: (name: string, value: string) => void,
  given: (name: string) => boolean,
  notes: string[],
): void {
  if (!given('MEMCACHE_HOST_PORT') && !given('MEMCACHE_SRV')) {
    throw new FloodgateError(
      'INVALID_OPTION',
      'BACKEND_TYPE=memcache: set MEMCACHE_HOST_PORT to the servers, host:port[,host:port…], or MEMCACHE_SRV to their SRV record',
    )
  }
  if (given('MEMCACHE_HOST_PORT')) set('FLOODGATE_MEMCACHED', env.MEMCACHE_HOST_PORT as string)
  if (given('MEMCACHE_SRV')) set('FLOODGATE_MEMCACHE_SRV', env.MEMCACHE_SRV as string)
  if (given('MEMCACHE_SRV_REFRESH')) {
    if (given('MEMCACHE_SRV')) set('FLOODGATE_MEMCACHE_SRV_REFRESH', goDuration(env.MEMCACHE_SRV_REFRESH as string))
    else notes.push('MEMCACHE_SRV_REFRESH is ignored without MEMCACHE_SRV, as upstream ignores it')
  }
  const tls = given('MEMCACHE_TLS') && !isFalse(env.MEMCACHE_TLS as string)
  if (tls) set('FLOODGATE_MEMCACHE_TLS', env.MEMCACHE_TLS as string)
  for (const [upstream, own] of MEMCACHE_TLS_FILES) {
    if (!given(upstream)) continue
    if (tls) set(own, env[upstream] as string)
    else notes.push(`${upstream} is ignored without MEMCACHE_TLS=true, as upstream ignores it`)
  }
}

/** Upstream's TLS files for memcache → --memcache-tls-*; upstream reads them only when MEMCACHE_TLS is on. */
const MEMCACHE_TLS_FILES: readonly [string, string][] = [
  ['MEMCACHE_TLS_CACERT', 'FLOODGATE_MEMCACHE_TLS_CA'],
  ['MEMCACHE_TLS_CLIENT_CERT', 'FLOODGATE_MEMCACHE_TLS_CERT'],
  ['MEMCACHE_TLS_CLIENT_KEY', 'FLOODGATE_MEMCACHE_TLS_KEY'],
  ['MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION', 'FLOODGATE_MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION'],
]

/** Upstream's TLS files for Redis → --redis-tls-*; upstream reads them only when REDIS_TLS or REDIS_PERSECOND_TLS is on. */
const REDIS_TLS_FILES: readonly [string, string][] = [
  ['REDIS_TLS_CACERT', 'FLOODGATE_REDIS_TLS_CA'],
  ['REDIS_TLS_CLIENT_CERT', 'FLOODGATE_REDIS_TLS_CERT'],
  ['REDIS_TLS_CLIENT_KEY', 'FLOODGATE_REDIS_TLS_KEY'],
  ['REDIS_TLS_SKIP_HOSTNAME_VERIFICATION', 'FLOODGATE_REDIS_TLS_SKIP_HOSTNAME_VERIFICATION'],
]

function readRedisTls(env: NodeJS.ProcessEnv, set: (name: string, value: string) => void, notes: string[]): void {
  const tls = isTrue(env.REDIS_TLS) || (isTrue(env.REDIS_PERSECOND) && isTrue(env.REDIS_PERSECOND_TLS))
  for (const [upstream, own] of REDIS_TLS_FILES) {
    if (env[upstream] === undefined || env[upstream] === '') continue
    if (tls && env.REDIS_URL) set(own, env[upstream] as string)
    else notes.push(`${upstream} is ignored without REDIS_TLS=true (or REDIS_PERSECOND_TLS=true), as upstream ignores it`)
  }
}

/**
 * A socket path as Floodgate's unix:// URL, REDIS_AUTH ("password" or "user:password") in its
 * query. TLS over a socket is refused: ioredis dials sockets in the clear.
 */
function unixUrl(path: string, auth: string | undefined, tls: boolean, names: { url: string; socket: string; tls: string }): string {
  if (!path.startsWith('/')) {
    throw new FloodgateError(
      'INVALID_OPTION',
      `${names.url}=${path} with ${names.socket}=unix (upstream's default): expected a socket path like /var/run/redis.sock; ` +
        `for host:port set ${names.socket}=tcp`,
    )
  }
  if (tls) {
    throw new FloodgateError('INVALID_OPTION', `${names.tls}=true with ${names.socket}=unix: Floodgate reaches a unix socket without TLS`)
  }
  const query = new URLSearchParams()
  if (auth !== undefined) {
    const colon = auth.indexOf(':')
    if (colon >= 0) query.set('username', auth.slice(0, colon))
    query.set('password', colon >= 0 ? auth.slice(colon + 1) : auth)
  }
  const search = query.size > 0 ? `?${query}` : ''
  return `unix://${path.split('/').map(encodeURIComponent).join('/')}${search}`
}

/**
 * REDIS_PERSECOND=true with REDIS_PERSECOND_URL (and its _SOCKET_TYPE, _TYPE, _AUTH, _TLS): the Redis
 * of upstream's per-second counters. Floodgate uses it for upstream's keys only (--compat-keys envoy).
 */
function readRedisPerSecond(env: NodeJS.ProcessEnv, set: (name: string, value: string) => void): void {
  const url = env.REDIS_PERSECOND_URL || '/var/run/nutcracker/ratelimitpersecond.sock'
  const socket = (env.REDIS_PERSECOND_SOCKET_TYPE || 'unix').toLowerCase()
  const type = (env.REDIS_PERSECOND_TYPE || 'SINGLE').toUpperCase()
  if (socket !== 'tcp' && socket !== 'unix') {
    throw new FloodgateError('INVALID_OPTION', `REDIS_PERSECOND_SOCKET_TYPE=${socket}: expected tcp or unix`)
  }
  if (type !== 'SINGLE') {
    throw new FloodgateError('INVALID_OPTION', `REDIS_PERSECOND_TYPE=${type}: Floodgate supports a single per-second Redis only`)
  }
  const auth = env.REDIS_PERSECOND_AUTH || undefined
  if (socket === 'unix') {
    const names = { url: 'REDIS_PERSECOND_URL', socket: 'REDIS_PERSECOND_SOCKET_TYPE', tls: 'REDIS_PERSECOND_TLS' }
    return set('FLOODGATE_REDIS_PER_SECOND', unixUrl(url, auth, isTrue(env.REDIS_PERSECOND_TLS), names))
  }
  if (/^rediss?:\/\//.test(url)) return set('FLOODGATE_REDIS_PER_SECOND', url)
  const userPassword = auth?.includes(':') ? auth.split(':').map(encodeURIComponent).join(':') : `:${encodeURIComponent(auth ?? '')}`
  const credentials = auth === undefined ? '' : `${userPassword}@`
  set('FLOODGATE_REDIS_PER_SECOND', `${isTrue(env.REDIS_PERSECOND_TLS) ? 'rediss' : 'redis'}://${credentials}${url}`)
}

/** Upstream's TLS files of the gRPC server → Floodgate's, used only with GRPC_SERVER_USE_TLS=true (as upstream). */
const GRPC_TLS_FILES: readonly [string, string][] = [
  ['GRPC_SERVER_TLS_CERT', 'FLOODGATE_GRPC_TLS_CERT'],
  ['GRPC_SERVER_TLS_KEY', 'FLOODGATE_GRPC_TLS_KEY'],
  ['GRPC_CLIENT_TLS_CACERT', 'FLOODGATE_GRPC_CLIENT_CA'],
  ['GRPC_CLIENT_TLS_SAN', 'FLOODGATE_GRPC_CLIENT_SAN'],
]

/** GRPC_SERVER_USE_TLS and its files, and GRPC_MAX_CONNECTION_AGE/_GRACE (Go durations, e.g. "1h30m"). */
function readGrpcListen(env: NodeJS.ProcessEnv, set: (name: string, value: string) => void, notes: string[]): void {
  const given = (name: string) => env[name] !== undefined && env[name] !== ''
  if (given('GRPC_SERVER_USE_TLS')) set('FLOODGATE_GRPC_TLS', env.GRPC_SERVER_USE_TLS as string)
  const tls = isTrue(env.GRPC_SERVER_USE_TLS)
  for (const [upstream, own] of GRPC_TLS_FILES) {
    if (!given(upstream)) continue
    if (tls) set(own, env[upstream] as string)
    else notes.push(`${upstream} is ignored without GRPC_SERVER_USE_TLS=true, as upstream ignores it`)
  }
  if (given('GRPC_MAX_CONNECTION_AGE')) set('FLOODGATE_GRPC_MAX_CONNECTION_AGE', goDuration(env.GRPC_MAX_CONNECTION_AGE as string))
  if (given('GRPC_MAX_CONNECTION_AGE_GRACE'))
    set('FLOODGATE_GRPC_MAX_CONNECTION_AGE_GRACE', goDuration(env.GRPC_MAX_CONNECTION_AGE_GRACE as string))
}

const GO_UNIT_MS: Readonly<Record<string, number>> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1_000, m: 60_000, h: 3_600_000 }

/**
 * A Go duration ("24h", "1h30m", "90s") as whole milliseconds; anything else is passed on as it is,
 * for Floodgate's own reader to accept (a plain number, "1d") or refuse with its reason.
 */
export function goDuration(value: string): string {
  if (!/^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/.test(value)) return value
  let ms = 0
  for (const [, number, unit] of value.matchAll(/(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/g)) ms += Number(number) * GO_UNIT_MS[unit]
  return String(Math.round(ms))
}

/** Upstream's log levels (logrus names, any case) as pino's. */
function logLevelOf(level: string): string {
  const lower = level.toLowerCase()
  if (lower === 'warning') return 'warn'
  if (lower === 'panic') return 'fatal'
  return lower
}

/** REDIS_URL with REDIS_TYPE (single, sentinel, cluster), REDIS_SOCKET_TYPE (tcp, unix: a path), REDIS_AUTH and REDIS_TLS. */
function readRedis(env: NodeJS.ProcessEnv, set: (name: string, value: string) => void): void {
  const url = env.REDIS_URL as string
  const type = (env.REDIS_TYPE || 'SINGLE').toUpperCase()
  const socket = (env.REDIS_SOCKET_TYPE || 'unix').toLowerCase()
  const auth = env.REDIS_AUTH || undefined
  if (socket !== 'tcp' && socket !== 'unix') {
    throw new FloodgateError('INVALID_OPTION', `REDIS_SOCKET_TYPE=${socket}: expected tcp or unix`)
  }
  if (socket === 'unix' && type === 'SINGLE') {
    const names = { url: 'REDIS_URL', socket: 'REDIS_SOCKET_TYPE', tls: 'REDIS_TLS' }
    set('FLOODGATE_REDIS_URL', unixUrl(url, auth, isTrue(env.REDIS_TLS), names))
    return
  }
  if (socket === 'unix') {
    throw new FloodgateError(
      'INVALID_OPTION',
      `REDIS_TYPE=${type} with REDIS_SOCKET_TYPE=unix: ${type.toLowerCase()} nodes are reached over TCP; set REDIS_SOCKET_TYPE=tcp`,
    )
  }
  if (type === 'SINGLE') {
    if (/^rediss?:\/\//.test(url)) {
      set('FLOODGATE_REDIS_URL', url)
      return
    }
    const scheme = isTrue(env.REDIS_TLS) ? 'rediss' : 'redis'
    // REDIS_AUTH is "password" or "user:password", as upstream.
    const credentials =
      auth === undefined
        ? ''
        : `${auth.includes(':') ? auth.split(':').map(encodeURIComponent).join(':') : `:${encodeURIComponent(auth)}`}@`
    set('FLOODGATE_REDIS_URL', `${scheme}://${credentials}${url}`)
    return
  }
  // As upstream's dialer: REDIS_AUTH on every Cluster node, or on the Sentinels' master; REDIS_SENTINEL_AUTH on the Sentinels.
  if (auth !== undefined) set('FLOODGATE_REDIS_AUTH', auth)
  // TLS to every Cluster node, or to the Sentinels and their master, as upstream's dialer.
  if (isTrue(env.REDIS_TLS)) set('FLOODGATE_REDIS_TLS', 'true')
  if (type === 'CLUSTER') {
    set('FLOODGATE_REDIS_CLUSTER', url)
    return
  }
  if (type === 'SENTINEL') {
    // Upstream's form: "master-name,host:port,host:port".
    const [name, ...sentinels] = url.split(',').map((part) => part.trim())
    if (sentinels.length === 0)
      throw new FloodgateError('INVALID_OPTION', `REDIS_URL=${url}: REDIS_TYPE=sentinel expects "master-name,host:port[,host:port…]"`)
    set('FLOODGATE_REDIS_SENTINEL_NAME', name)
    set('FLOODGATE_REDIS_SENTINELS', sentinels.join(','))
    if (env.REDIS_SENTINEL_AUTH) set('FLOODGATE_REDIS_SENTINEL_AUTH', env.REDIS_SENTINEL_AUTH)
    return
  }
  throw new FloodgateError('INVALID_OPTION', `REDIS_TYPE=${type}: expected single, sentinel or cluster`)
}
