// The options of `floodgate serve`: each flag, its environment variable, its value's type and its help.
// Pure data, importing only more of it: `floodgate serve --help` reads it without loading the service.

import { COMPAT_OPTIONS } from './compat-options.js'
import { REDIS_AUTH_OPTIONS } from './redis-auth-options.js'
import { MEMCACHE_SRV_OPTIONS, MEMCACHE_TLS_OPTIONS } from './memcache-options.js'
import { TELEMETRY_OPTIONS } from './telemetry-options.js'

/** One option: its flag, its environment variable, and whether it takes a value. */
export interface OptionSpec {
  flag: string
  env: string
  type: 'string' | 'boolean'
  help: string
  /** The flag may be given several times (its variable then holds a comma-separated list). */
  multiple?: boolean
}

// Abuse bounds: slow clients, connection floods, memory (settings.ts reads them into AbuseBounds).
export const ABUSE_BOUND_OPTIONS = {
  requestTimeout: {
    flag: 'request-timeout',
    env: 'FLOODGATE_REQUEST_TIMEOUT',
    type: 'string',
    help: 'a request (head and body) must arrive within this, else 408 (default 10s)',
  },
  connectionTimeout: {
    flag: 'connection-timeout',
    env: 'FLOODGATE_CONNECTION_TIMEOUT',
    type: 'string',
    help: 'close a socket silent this long during a request (default 60s)',
  },
  keepAliveTimeout: {
    flag: 'keep-alive-timeout',
    env: 'FLOODGATE_KEEP_ALIVE_TIMEOUT',
    type: 'string',
    help: 'close an idle keep-alive socket after this (default 72s)',
  },
  maxConnections: {
    flag: 'max-connections',
    env: 'FLOODGATE_MAX_CONNECTIONS',
    type: 'string',
    help: 'most HTTP sockets open at once; past it an idle one is shed, from an address over its share first (default 10000)',
  },
  memoryMaxKeys: {
    flag: 'memory-max-keys',
    env: 'FLOODGATE_MEMORY_MAX_KEYS',
    type: 'string',
    help: 'embedded store: most keys kept (default 100000)',
  },
  memoryMaxBytes: {
    flag: 'memory-max-bytes',
    env: 'FLOODGATE_MEMORY_MAX_BYTES',
    type: 'string',
    help: 'embedded store: most bytes of keys kept (default 67108864)',
  },
} as const satisfies Record<string, OptionSpec>

// Edges: health that follows the store, the gRPC port's socket bounds (guard-settings.ts reads them).
export const GUARD_OPTIONS = {
  healthCheckStore: {
    flag: 'health-check-store',
    env: 'FLOODGATE_HEALTH_CHECK_STORE',
    type: 'boolean',
    help: 'gRPC health NOT_SERVING, /healthcheck 500 while the store is unreachable',
  },
  healthRequiresRules: {
    flag: 'health-requires-rules',
    env: 'FLOODGATE_HEALTH_REQUIRES_RULES',
    type: 'boolean',
    help: 'gRPC health NOT_SERVING, /healthcheck 500 until xDS has sent a config',
  },
  grpcMaxConnections: {
    flag: 'grpc-max-connections',
    env: 'FLOODGATE_GRPC_MAX_CONNECTIONS',
    type: 'string',
    help: 'most gRPC connections at once; past it an idle one is shed, from an address over its share first (default 10000)',
  },
  grpcIdleTimeout: {
    flag: 'grpc-idle-timeout',
    env: 'FLOODGATE_GRPC_IDLE_TIMEOUT',
    type: 'string',
    help: 'close a gRPC connection with no call for this long (default 5m)',
  },
  grpcHandshakeTimeout: {
    flag: 'grpc-handshake-timeout',
    env: 'FLOODGATE_GRPC_HANDSHAKE_TIMEOUT',
    type: 'string',
    help: 'a gRPC connection must send the HTTP/2 preface within this (default 10s)',
  },
  grpcKeepaliveMinTime: {
    flag: 'grpc-keepalive-min-time',
    env: 'FLOODGATE_GRPC_KEEPALIVE_MIN_TIME',
    type: 'string',
    help: 'shortest interval allowed between client pings (default 5m)',
  },
  grpcMaxConcurrentStreams: {
    flag: 'grpc-max-concurrent-streams',
    env: 'FLOODGATE_GRPC_MAX_CONCURRENT_STREAMS',
    type: 'string',
    help: 'most calls at once per gRPC connection (default 100)',
  },
} as const satisfies Record<string, OptionSpec>

// TLS to Redis, for every Redis connection the service makes (settings in redis-tls-settings.ts).
export const REDIS_TLS_OPTIONS = {
  redisTls: {
    flag: 'redis-tls',
    env: 'FLOODGATE_REDIS_TLS',
    type: 'boolean',
    help: 'TLS to --redis-cluster nodes, --redis-sentinel and its master (a URL: rediss://)',
  },
  redisTlsCa: { flag: 'redis-tls-ca', env: 'FLOODGATE_REDIS_TLS_CA', type: 'string', help: 'PEM file of CAs trusted for Redis' },
  redisTlsCert: { flag: 'redis-tls-cert', env: 'FLOODGATE_REDIS_TLS_CERT', type: 'string', help: 'PEM client certificate for Redis' },
  redisTlsKey: { flag: 'redis-tls-key', env: 'FLOODGATE_REDIS_TLS_KEY', type: 'string', help: 'PEM key of --redis-tls-cert' },
  redisTlsSkipHostnameVerification: {
    flag: 'redis-tls-skip-hostname-verification',
    env: 'FLOODGATE_REDIS_TLS_SKIP_HOSTNAME_VERIFICATION',
    type: 'boolean',
    help: "verify Redis's certificate chain but not its name",
  },
} as const satisfies Record<string, OptionSpec>

// How the gRPC port listens: TLS and mTLS, a unix socket, connection age (grpc-listen-settings.ts reads them).
export const GRPC_LISTEN_OPTIONS = {
  grpcTls: {
    flag: 'grpc-tls',
    env: 'FLOODGATE_GRPC_TLS',
    type: 'boolean',
    help: 'serve gRPC over TLS (needs --grpc-tls-cert, --grpc-tls-key)',
  },
  grpcTlsCert: {
    flag: 'grpc-tls-cert',
    env: 'FLOODGATE_GRPC_TLS_CERT',
    type: 'string',
    help: 'PEM certificate chain of the gRPC server; reloaded when the file changes',
  },
  grpcTlsKey: {
    flag: 'grpc-tls-key',
    env: 'FLOODGATE_GRPC_TLS_KEY',
    type: 'string',
    help: 'PEM private key of --grpc-tls-cert; reloaded too',
  },
  grpcClientCa: {
    flag: 'grpc-client-ca',
    env: 'FLOODGATE_GRPC_CLIENT_CA',
    type: 'string',
    help: 'PEM CA of client certificates: mTLS, a client without one is refused',
  },
  grpcClientSan: {
    flag: 'grpc-client-san',
    env: 'FLOODGATE_GRPC_CLIENT_SAN',
    type: 'string',
    help: 'DNS name a client certificate must carry as subjectAltName',
  },
  grpcSocket: { flag: 'grpc-socket', env: 'FLOODGATE_GRPC_SOCKET', type: 'string', help: 'serve gRPC on this unix socket, not TCP' },
  grpcMaxConnectionAge: {
    flag: 'grpc-max-connection-age',
    env: 'FLOODGATE_GRPC_MAX_CONNECTION_AGE',
    type: 'string',
    help: 'GOAWAY to a gRPC connection this old, ±10% (default 24h)',
  },
  grpcMaxConnectionAgeGrace: {
    flag: 'grpc-max-connection-age-grace',
    env: 'FLOODGATE_GRPC_MAX_CONNECTION_AGE_GRACE',
    type: 'string',
    help: 'then cut it after this, calls still running or not (default 1h)',
  },
  noGrpcAwaitSettings: {
    flag: 'no-grpc-await-settings',
    env: 'FLOODGATE_NO_GRPC_AWAIT_SETTINGS',
    type: 'boolean',
    help: 'give a plaintext gRPC connection its HTTP/2 session on the preface alone, before its SETTINGS frame',
  },
  grpcCloseBatch: {
    flag: 'grpc-close-batch',
    env: 'FLOODGATE_GRPC_CLOSE_BATCH',
    type: 'string',
    help: 'most gRPC connections closed at their deadlines per event-loop turn (default 64)',
  },
} as const satisfies Record<string, OptionSpec>

/** The options of `floodgate serve`, for parsing and for `--help`. */
export const SERVE_OPTIONS = {
  config: { flag: 'config', env: 'FLOODGATE_CONFIG', type: 'string', help: 'rules file or directory (required)' },
  redisUrl: {
    flag: 'redis',
    env: 'FLOODGATE_REDIS_URL',
    type: 'string',
    help: 'Redis URL: redis://host:6379, rediss://… (TLS) or unix:///path/redis.sock',
  },
  redisCluster: { flag: 'redis-cluster', env: 'FLOODGATE_REDIS_CLUSTER', type: 'string', help: 'Redis Cluster seed nodes host:port,…' },
  redisSentinels: { flag: 'redis-sentinel', env: 'FLOODGATE_REDIS_SENTINELS', type: 'string', help: 'Redis Sentinels host:port,…' },
  sentinelName: { flag: 'sentinel-name', env: 'FLOODGATE_REDIS_SENTINEL_NAME', type: 'string', help: 'master name the Sentinels watch' },
  redisPrefix: {
    flag: 'redis-prefix',
    env: 'FLOODGATE_REDIS_PREFIX',
    type: 'string',
    help: 'key prefix in Redis, memcached (default fg:)',
  },
  memcached: { flag: 'memcached', env: 'FLOODGATE_MEMCACHED', type: 'string', help: 'memcached servers host:port,…' },
  ...COMPAT_OPTIONS,
  host: { flag: 'host', env: 'FLOODGATE_HOST', type: 'string', help: 'address to listen on (default 0.0.0.0)' },
  httpPort: { flag: 'http-port', env: 'FLOODGATE_HTTP_PORT', type: 'string', help: 'HTTP port (default 8080; 0 = any free port)' },
  grpcPort: { flag: 'grpc-port', env: 'FLOODGATE_GRPC_PORT', type: 'string', help: 'gRPC port (default 8081; 0 = any free port)' },
  adminToken: { flag: 'admin-token', env: 'FLOODGATE_ADMIN_TOKEN', type: 'string', help: 'bearer token enabling /admin and /dashboard' },
  dashboardRawKeys: {
    flag: 'dashboard-raw-keys',
    env: 'FLOODGATE_DASHBOARD_RAW_KEYS',
    type: 'boolean',
    help: 'show keys unhashed on /dashboard',
  },
  onStoreError: {
    flag: 'on-store-error',
    env: 'FLOODGATE_ON_STORE_ERROR',
    type: 'string',
    help: 'open | closed | local | error (default: open on /v1/check, error on gRPC and /json)',
  },
  instances: {
    flag: 'instances',
    env: 'FLOODGATE_INSTANCES',
    type: 'string',
    help: 'instances sharing the limits, for local fallback (default 1)',
  },
  // Adaptive by default (store-timeout.ts reads the pair); upstream's REDIS_TIMEOUT sets the maximum.
  storeTimeout: {
    flag: 'store-timeout',
    env: 'FLOODGATE_STORE_TIMEOUT',
    type: 'string',
    help: 'fixed wait for the store; with --store-timeout-max, the shortest adaptive wait (default adaptive 100ms..2s)',
  },
  storeTimeoutMax: {
    flag: 'store-timeout-max',
    env: 'FLOODGATE_STORE_TIMEOUT_MAX',
    type: 'string',
    help: "longest wait for the store, adaptive below it (default 2s; upstream's REDIS_TIMEOUT sets it)",
  },
  logLevel: {
    flag: 'log-level',
    env: 'FLOODGATE_LOG_LEVEL',
    type: 'string',
    help: 'fatal|error|warn|info|debug|trace|silent (default info)',
  },
  noWatch: { flag: 'no-watch', env: 'FLOODGATE_NO_WATCH', type: 'boolean', help: 'do not reload rules when files change' },
  bodyLimit: { flag: 'body-limit', env: 'FLOODGATE_BODY_LIMIT', type: 'string', help: 'largest HTTP body in bytes (default 65536)' },
  grpcResponseHeaders: {
    flag: 'grpc-response-headers',
    env: 'FLOODGATE_GRPC_RESPONSE_HEADERS',
    type: 'boolean',
    help: 'add RateLimit headers to gRPC answers',
  },
  nearLimitRatio: {
    flag: 'near-limit-ratio',
    env: 'FLOODGATE_NEAR_LIMIT_RATIO',
    type: 'string',
    help: 'share of a limit counted as near_limit (default 0.8)',
  },
  shutdownTimeout: {
    flag: 'shutdown-timeout',
    env: 'FLOODGATE_SHUTDOWN_TIMEOUT',
    type: 'string',
    help: 'longest graceful drain (default 10s)',
  },
  ...ABUSE_BOUND_OPTIONS,
  ...GUARD_OPTIONS,
  ...TELEMETRY_OPTIONS,
  ...REDIS_TLS_OPTIONS,
  ...REDIS_AUTH_OPTIONS,
  ...GRPC_LISTEN_OPTIONS,
  ...MEMCACHE_SRV_OPTIONS,
  ...MEMCACHE_TLS_OPTIONS,

  // --- Envoy drop-in: envoyproxy/ratelimit's settings (its own variable names are read in upstream-env.ts) ---
  mergeDomains: {
    flag: 'merge-domains',
    env: 'FLOODGATE_MERGE_DOMAINS',
    type: 'boolean',
    help: "a domain's descriptors may span files (upstream's MERGE_DOMAIN_CONFIG)",
  },
  wildcardOrder: {
    flag: 'wildcard-order',
    env: 'FLOODGATE_WILDCARD_ORDER',
    type: 'string',
    help: 'file (upstream: first in file order) | specific (most literal characters first); default file',
  },
  limitHeader: {
    flag: 'limit-header',
    env: 'FLOODGATE_LIMIT_HEADER',
    type: 'string',
    help: 'name of the limit header (default RateLimit-Limit)',
  },
  remainingHeader: {
    flag: 'remaining-header',
    env: 'FLOODGATE_REMAINING_HEADER',
    type: 'string',
    help: 'name of the remaining header (default RateLimit-Remaining)',
  },
  resetHeader: {
    flag: 'reset-header',
    env: 'FLOODGATE_RESET_HEADER',
    type: 'string',
    help: 'name of the reset header (default RateLimit-Reset)',
  },
  stopIncrement: {
    flag: 'stop-increment-when-over-limit',
    env: 'FLOODGATE_STOP_INCREMENT_WHEN_OVER_LIMIT',
    type: 'boolean',
    help: 'a request over some limit does not charge its other descriptors',
  },
  globalShadowMode: {
    flag: 'shadow-mode',
    env: 'FLOODGATE_SHADOW_MODE',
    type: 'boolean',
    help: 'never answer OVER_LIMIT overall (descriptors still report it)',
  },
  globalQuotaMode: { flag: 'quota-mode', env: 'FLOODGATE_QUOTA_MODE', type: 'boolean', help: 'treat every descriptor as quota_mode' },
  dynamicMetadata: {
    flag: 'response-dynamic-metadata',
    env: 'FLOODGATE_RESPONSE_DYNAMIC_METADATA',
    type: 'boolean',
    help: 'describe the request in Envoy dynamic metadata',
  },
  maxDescriptors: {
    flag: 'max-descriptors',
    env: 'FLOODGATE_MAX_DESCRIPTORS',
    type: 'string',
    help: 'most descriptors per request (default 64)',
  },
  maxDescriptorEntries: {
    flag: 'max-descriptor-entries',
    env: 'FLOODGATE_MAX_DESCRIPTOR_ENTRIES',
    type: 'string',
    help: 'most entries per descriptor (default 32)',
  },
  grpcMaxMessage: {
    flag: 'grpc-max-message',
    env: 'FLOODGATE_GRPC_MAX_MESSAGE',
    type: 'string',
    help: 'largest gRPC request in bytes (default 65536)',
  },
  upstreamMetrics: {
    flag: 'upstream-metrics',
    env: 'FLOODGATE_UPSTREAM_METRICS',
    type: 'boolean',
    help: 'also export ratelimit_service_* metric names',
  },

  // Which servers run and how logs read (the CLI's first-hour options).
  noHttp: { flag: 'no-http', env: 'FLOODGATE_NO_HTTP', type: 'boolean', help: 'serve gRPC only (no HTTP API, no /metrics)' },
  noGrpc: { flag: 'no-grpc', env: 'FLOODGATE_NO_GRPC', type: 'boolean', help: 'serve HTTP only (no Envoy gRPC API)' },
  logFormat: {
    flag: 'log-format',
    env: 'FLOODGATE_LOG_FORMAT',
    type: 'string',
    help: 'pretty | json (default pretty on a terminal, else json)',
  },

  // Several regions (docs/regions.md).
  region: {
    flag: 'region',
    env: 'FLOODGATE_REGION',
    type: 'string',
    help: "this region's name; policies with regions: shared|split limit across regions",
  },
  peer: {
    flag: 'peer',
    env: 'FLOODGATE_PEERS',
    type: 'string',
    multiple: true,
    help: 'another region as NAME=redis://… (repeat; the variable: a comma-separated list)',
  },
  regionInterval: {
    flag: 'region-interval',
    env: 'FLOODGATE_REGION_INTERVAL',
    type: 'string',
    help: 'how often usage is exchanged with peers (default 100ms)',
  },
  regionsFile: {
    flag: 'regions-file',
    env: 'FLOODGATE_REGIONS_FILE',
    type: 'string',
    help: 'YAML with region, peers and interval (instead of the three above)',
  },
} as const satisfies Record<string, OptionSpec>

export type OptionName = keyof typeof SERVE_OPTIONS
