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
]

/** Accepted and ignored: they tune upstream's own machinery, and Floodgate answers the same without them. */
const HARMLESS: Readonly<Record<string, string>> = {
  PROMETHEUS_ADDR: 'metrics are served on the HTTP port, GET /metrics',
  PROMETHEUS_PATH: 'metrics are served on the HTTP port, GET /metrics',
  PROMETHEUS_MAPPER_YAML: 'FLOODGATE_UPSTREAM_METRICS=true exports upstream default mapping',
  PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS: 'latency is floodgate_decision_duration_seconds',
  LOG_FORMAT: 'Floodgate logs JSON lines',
  DEBUG_HOST: 'no debug listener; /admin and /metrics are on the HTTP port',
  DEBUG_PORT: 'no debug listener; /admin and /metrics are on the HTTP port',
  RUNTIME_WATCH_ROOT: 'the rules directory is watched, symlink swaps (Kubernetes ConfigMaps) included',
  RUNTIME_IGNOREDOTFILES: 'dot files are always skipped',
  LOCAL_CACHE_SIZE_IN_BYTES: 'upstream-format rules are counted exactly in the store; limits: rules have a bounded deny cache',
  EXPIRATION_JITTER_MAX_SECONDS: 'counters expire at the end of their window',
  REDIS_POOL_SIZE: 'requests to Redis are batched on one connection',
  REDIS_PIPELINE_WINDOW: 'requests to Redis are batched per event-loop turn',
  REDIS_PIPELINE_LIMIT: 'requests to Redis are batched per event-loop turn',
  REDIS_CLUSTER_PIPELINE_PARALLELISM: 'requests to Redis are batched per slot',
  REDIS_POOL_ON_EMPTY_BEHAVIOR: 'requests to Redis are batched on one connection',
  REDIS_STARTUP_INITIAL_INTERVAL: 'the Redis client reconnects by itself',
  REDIS_STARTUP_MAX_INTERVAL: 'the Redis client reconnects by itself',
  REDIS_STARTUP_MAX_ELAPSED_TIME: 'the Redis client reconnects by itself',
  HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED: 'Floodgate does not start without valid rules',
  GRPC_MAX_CONNECTION_AGE: 'connections close when idle (--grpc-idle-timeout), shed at --grpc-max-connections, or at shutdown',
  GRPC_MAX_CONNECTION_AGE_GRACE: 'connections close when idle (--grpc-idle-timeout), shed at --grpc-max-connections, or at shutdown',
  CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL: 'the xDS client paces every reconnect by XDS_CLIENT_BACKOFF_*',
  MEMCACHE_MAX_IDLE_CONNS: 'the memcached client keeps one connection per server and pipelines on it',
}

/** Refused when set to anything but upstream's default: Floodgate cannot do what they ask, and answers would differ. */
const REFUSED: readonly { name: string; isDefault: (value: string) => boolean; reason: string }[] = [
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
  { name: 'MERGE_DOMAIN_CONFIG', isDefault: isFalse, reason: 'each domain must be in one file; merge the files of a domain' },
  { name: 'GRPC_UDS', isDefault: (v) => v === '', reason: 'gRPC listens on TCP only; use GRPC_HOST and GRPC_PORT' },
  { name: 'GRPC_SERVER_USE_TLS', isDefault: isFalse, reason: 'gRPC is served without TLS; terminate TLS in a sidecar or at Envoy' },
  { name: 'FORCE_START_WITHOUT_INITIAL_CONFIG', isDefault: isFalse, reason: 'Floodgate needs valid rules to start' },
  { name: 'REDIS_TLS_CLIENT_CERT', isDefault: (v) => v === '', reason: 'client certificates for Redis are not supported' },
  { name: 'REDIS_TLS_CACERT', isDefault: (v) => v === '', reason: 'a custom CA for Redis is not supported' },
  { name: 'MEMCACHE_SRV', isDefault: (v) => v === '', reason: 'servers are not looked up by SRV record; list them in MEMCACHE_HOST_PORT' },
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
    if (value !== undefined && !isDefault(value))
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

  if (given('LOG_LEVEL')) set('FLOODGATE_LOG_LEVEL', logLevelOf(env.LOG_LEVEL as string))

  if (given('RUNTIME_ROOT') || given('RUNTIME_SUBDIRECTORY')) {
    // Upstream reads the rules from <root>/<subdirectory>/<app directory>.
    const root = env.RUNTIME_ROOT || '/srv/runtime_data/current'
    set('FLOODGATE_CONFIG', join(root, env.RUNTIME_SUBDIRECTORY ?? '', env.RUNTIME_APPDIRECTORY || 'config'))
  }

  if (/^memcache$/i.test(env.BACKEND_TYPE ?? '')) {
    // As upstream: the memcache backend ignores every REDIS_* setting.
    if (!given('MEMCACHE_HOST_PORT')) {
      throw new FloodgateError('INVALID_OPTION', 'BACKEND_TYPE=memcache: set MEMCACHE_HOST_PORT to the servers, host:port[,host:port…]')
    }
    set('FLOODGATE_MEMCACHED', env.MEMCACHE_HOST_PORT as string)
    if (given('REDIS_URL')) notes.push('REDIS_URL is ignored with BACKEND_TYPE=memcache, as upstream ignores it')
    if (isTrue(env.REDIS_PERSECOND)) notes.push('REDIS_PERSECOND is ignored with BACKEND_TYPE=memcache, as upstream ignores it')
    if (given('REDIS_HEALTH_CHECK_ACTIVE_CONNECTION'))
      notes.push('REDIS_HEALTH_CHECK_ACTIVE_CONNECTION is ignored with BACKEND_TYPE=memcache, as upstream ignores it')
    return { env: out, notes }
  }
  if (given('MEMCACHE_HOST_PORT')) notes.push('MEMCACHE_HOST_PORT is ignored without BACKEND_TYPE=memcache, as upstream ignores it')
  if (given('REDIS_URL')) readRedis(env, set)
  // Health follows the store: NOT_SERVING and /healthcheck 500 while Redis is unreachable.
  if (given('REDIS_HEALTH_CHECK_ACTIVE_CONNECTION')) set('FLOODGATE_HEALTH_CHECK_STORE', env.REDIS_HEALTH_CHECK_ACTIVE_CONNECTION as string)
  if (isTrue(env.REDIS_PERSECOND)) readRedisPerSecond(env, set)
  return { env: out, notes }
}

/**
 * REDIS_PERSECOND=true with REDIS_PERSECOND_URL (and its _SOCKET_TYPE, _TYPE, _AUTH, _TLS): the Redis
 * of upstream's per-second counters. Floodgate uses it for upstream's keys only (--compat-keys envoy).
 */
function readRedisPerSecond(env: NodeJS.ProcessEnv, set: (name: string, value: string) => void): void {
  const url = env.REDIS_PERSECOND_URL || '/var/run/nutcracker/ratelimitpersecond.sock'
  const socket = (env.REDIS_PERSECOND_SOCKET_TYPE || 'unix').toLowerCase()
  const type = (env.REDIS_PERSECOND_TYPE || 'SINGLE').toUpperCase()
  if (socket !== 'tcp') {
    throw new FloodgateError(
      'INVALID_OPTION',
      `REDIS_PERSECOND_SOCKET_TYPE=${socket}: Floodgate connects to the per-second Redis over TCP only; ` +
        'set it to tcp and REDIS_PERSECOND_URL=host:port',
    )
  }
  if (type !== 'SINGLE') {
    throw new FloodgateError('INVALID_OPTION', `REDIS_PERSECOND_TYPE=${type}: Floodgate supports a single per-second Redis only`)
  }
  if (/^rediss?:\/\//.test(url)) return set('FLOODGATE_REDIS_PER_SECOND', url)
  const auth = env.REDIS_PERSECOND_AUTH || undefined
  const userPassword = auth?.includes(':') ? auth.split(':').map(encodeURIComponent).join(':') : `:${encodeURIComponent(auth ?? '')}`
  const credentials = auth === undefined ? '' : `${userPassword}@`
  set('FLOODGATE_REDIS_PER_SECOND', `${isTrue(env.REDIS_PERSECOND_TLS) ? 'rediss' : 'redis'}://${credentials}${url}`)
}

/** Upstream's log levels (logrus names, any case) as pino's. */
function logLevelOf(level: string): string {
  const lower = level.toLowerCase()
  if (lower === 'warning') return 'warn'
  if (lower === 'panic') return 'fatal'
  return lower
}

/** REDIS_URL with REDIS_TYPE (single, sentinel, cluster), REDIS_SOCKET_TYPE, REDIS_AUTH and REDIS_TLS. */
function readRedis(env: NodeJS.ProcessEnv, set: (name: string, value: string) => void): void {
  const url = env.REDIS_URL as string
  const type = (env.REDIS_TYPE || 'SINGLE').toUpperCase()
  const socket = (env.REDIS_SOCKET_TYPE || 'unix').toLowerCase()
  const auth = env.REDIS_AUTH || undefined
  if (socket !== 'tcp') {
    throw new FloodgateError(
      'INVALID_OPTION',
      `REDIS_SOCKET_TYPE=${socket}: Floodgate connects to Redis over TCP only; set REDIS_SOCKET_TYPE=tcp and REDIS_URL=host:port`,
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
  if (auth !== undefined || isTrue(env.REDIS_TLS)) {
    throw new FloodgateError(
      'INVALID_OPTION',
      `REDIS_TYPE=${type} with REDIS_AUTH or REDIS_TLS: not supported by Floodgate; ` +
        'use a single Redis (REDIS_TYPE=single) for authenticated or TLS connections',
    )
  }
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
    return
  }
  throw new FloodgateError('INVALID_OPTION', `REDIS_TYPE=${type}: expected single, sentinel or cluster`)
}
