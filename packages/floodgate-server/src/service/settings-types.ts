// The Settings type of `floodgate serve`: what the service can be told, as settings.ts hands it to the server.

import type { ResponseHeaderNames } from './envoy-response.js'
import type { RegionSettings } from './region-settings.js'
import type { StoreTimeoutMs } from './store-timeout.js'
import type { GuardSettings } from './guard-settings.js'
import type { GrpcListenSettings } from './grpc-listen-settings.js'
import type { AbuseBounds } from './abuse-bounds.js'
import type { RedisTlsSettings } from './redis-connection.js'
import type { RedisAuth } from './redis-auth-settings.js'
import type { XdsSettings } from './xds/xds-settings.js'
import type { TelemetrySettings } from './telemetry-settings.js'
import type { MemcacheSrvSettings } from './memcache-srv-settings.js'
import type { MemcachedTlsOptions } from 'floodgate/memcached'

/** Where rate-limit state lives. */
export type StoreSettings =
  | { kind: 'memory' }
  /** `url`: redis://, rediss:// (TLS) or unix:///path (a socket). */
  | { kind: 'redis'; url: string }
  /** `auth`: AUTH on every node (a Cluster's nodes share their credentials). */
  | { kind: 'cluster'; nodes: HostPort[]; auth?: RedisAuth }
  /** `auth`: the master's and its replicas' AUTH; `sentinelAuth`: the Sentinels' own. */
  | { kind: 'sentinel'; sentinels: HostPort[]; name: string; auth?: RedisAuth; sentinelAuth?: RedisAuth }
  /** With `srv`, `servers` is empty: the service looks the record up at start (MEMCACHE_SRV). */
  /** `tls`: the store's (and --compat-keys envoy's counter's) TLS options, with --memcache-tls. */
  | { kind: 'memcached'; servers: string[]; srv?: MemcacheSrvSettings; tls?: MemcachedTlsOptions }

export interface HostPort {
  host: string
  port: number
}

/** Everything the service can be told; nothing else reads flags or the environment. */
export interface Settings extends AbuseBounds, StoreTimeoutMs, GuardSettings, TelemetrySettings, GrpcListenSettings {
  /** The rules: one YAML file or a directory of them (`xds:<server>` when they come from xDS). */
  config: string
  /** CONFIG_TYPE=GRPC_XDS_SOTW: rules come from this xDS management server instead of `config`. */
  xds?: XdsSettings
  store: StoreSettings
  /** Key prefix in Redis (or memcached), so several deployments can share one. */
  redisPrefix: string
  /**
   * `envoy`: rules in envoyproxy/ratelimit's format count under upstream's own keys, the way it
   * counts (see compat-keys.ts), so a fleet half on upstream and half on Floodgate enforces one limit.
   */
  compatKeys: 'envoy' | undefined
  /** Upstream's CACHE_KEY_PREFIX, put before its keys in compat mode (default empty, as upstream). */
  compatPrefix: string
  /** Compat mode: a separate Redis for per-second counters, as upstream's REDIS_PERSECOND_URL. */
  redisPerSecondUrl: string | undefined
  /** Compat mode: each shared counter's expiry gets 0 to this many seconds less one added at random, as upstream's. */
  compatExpiryJitterSeconds: number
  /** TLS files and options for every TLS connection to Redis (main, per-second, Cluster, Sentinel). */
  redisTls: RedisTlsSettings
  host: string
  /** 0 picks a free port (tests). */
  httpPort: number
  grpcPort: number
  /** Bearer token for `/admin`; undefined disables the admin API (404). */
  adminToken: string | undefined
  /** `error` answers an error instead of deciding in a failure mode (the limiter then runs as `open`). */
  onStoreError: 'open' | 'closed' | 'local' | 'error'
  /** For `local`: how many service instances share the limits. */
  instances: number
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent'
  /** Reload the rules when their files change. */
  watch: boolean
  /** Largest accepted HTTP request body. */
  bodyLimitBytes: number
  /** Add RateLimit headers to gRPC `response_headers_to_add` (Envoy forwards them to the client). */
  grpcResponseHeaders: boolean
  /** Fraction of a limit used from which a hit counts as `near_limit` (as envoyproxy/ratelimit: 0.8). */
  nearLimitRatio: number
  /** Longest a graceful shutdown waits for in-flight requests before closing anyway. */
  shutdownTimeoutMs: number

  // --- Envoy drop-in: envoyproxy/ratelimit's behaviour and settings ---
  /**
   * The Envoy paths' (gRPC, /json) store-failure handling: --on-store-error when given, else `error` (Envoy's
   * failure_mode_deny decides).
   */
  envoyOnStoreError: 'open' | 'closed' | 'local' | 'error'
  /** Which of several wildcard values wins: `file` order (upstream) or the most `specific`. */
  wildcardOrder: 'file' | 'specific'
  /** RateLimit-* header names added to Envoy answers when `grpcResponseHeaders` is on. */
  responseHeaderNames: ResponseHeaderNames
  /** MERGE_DOMAIN_CONFIG: a domain's descriptors may be spread over several files. */
  mergeDomains: boolean
  /** STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT. */
  stopIncrementWhenOverLimit: boolean
  /** SHADOW_MODE: never answer OVER_LIMIT overall. */
  globalShadowMode: boolean
  /** QUOTA_MODE: every descriptor is a quota descriptor. */
  globalQuotaMode: boolean
  /** RESPONSE_DYNAMIC_METADATA. */
  dynamicMetadata: boolean
  /** Most descriptors per Envoy request, and entries per descriptor. */
  maxDescriptors: number
  maxDescriptorEntries: number
  /** Largest gRPC request message. */
  grpcMaxMessageBytes: number
  /** Also export envoyproxy/ratelimit's Prometheus names (USE_PROMETHEUS). */
  upstreamMetrics: boolean
  /** The dashboard (at /dashboard with the admin token) shows keys as they are, not hashed. */
  dashboardRawKeys?: boolean
  /** Upstream variables accepted without effect, to log at start. */
  upstreamNotes: string[]

  // Which servers run and how logs read (the CLI's first-hour options).
  /** Serve the HTTP API (false: `--no-http`, gRPC only). */
  http: boolean
  /** Serve Envoy's gRPC API (false: `--no-grpc`, HTTP only). */
  grpc: boolean
  /** `pretty` (human-readable) or `json` (one object per line); undefined: pretty on a terminal, JSON otherwise. */
  logFormat: 'pretty' | 'json' | undefined

  /** This service's region and its peers (docs/regions.md); undefined when the service is alone. */
  regions: RegionSettings | undefined
}
