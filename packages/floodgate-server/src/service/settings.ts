// Settings of `floodgate serve`: every option from a CLI flag or an environment variable, read once and validated.

import { parseArgs } from 'node:util'
import { z } from 'zod'
import { FloodgateError, parseDuration } from 'floodgate'
import type { ResponseHeaderNames } from './envoy-response.js'
import { readUpstreamEnvironment } from './upstream-env.js'
import { type OptionName, type OptionSpec, SERVE_OPTIONS } from './serve-options.js'
import { unknownFlagMessage } from './serve-help.js'
import { peerEntry, readRegionsFile, REGION_NAME, type RegionSettings } from './region-settings.js'
import { optionalDurationMs, storeTimeoutBounds, type StoreTimeoutMs } from './store-timeout.js'
import { guardFields, guardSettings, type GuardSettings } from './guard-settings.js'

export type { RegionSettings } from './region-settings.js'

/** Where rate-limit state lives. */
export type StoreSettings =
  | { kind: 'memory' }
  | { kind: 'redis'; url: string }
  | { kind: 'cluster'; nodes: HostPort[] }
  | { kind: 'sentinel'; sentinels: HostPort[]; name: string }
  | { kind: 'memcached'; servers: string[] }

export interface HostPort {
  host: string
  port: number
}

/** Everything the service can be told; nothing else reads flags or the environment. */
export interface Settings extends AbuseBounds, StoreTimeoutMs, GuardSettings {
  /** The rules: one YAML file or a directory of them. */
  config: string
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

// ── Abuse bounds: slow clients, connection floods, memory. One block, kept apart from the rest. ──

/** Bounds that keep slow or abusive clients from holding sockets or memory; production defaults. */
export interface AbuseBounds {
  /** A request's head and body must arrive within this, else 408 and the socket closes (default 10s). */
  requestTimeoutMs: number
  /** A socket silent this long while a request is open closes, e.g. a client that stops reading (default 60s). */
  connectionTimeoutMs: number
  /** An idle keep-alive socket closes after this (default 72s: longer than the usual 60s of load balancers, so they close first). */
  keepAliveTimeoutMs: number
  /** Most HTTP sockets open at once; past it new connections are refused (default 10000). */
  maxConnections: number
  /** Embedded store: most keys kept (default 100000); see MemoryStore's maxKeys. */
  memoryMaxKeys: number
  /** Embedded store: most bytes its keys may count for (default 64 MiB); see MemoryStore's maxBytes. */
  memoryMaxBytes: number
}

/** Whole number ≥ 1, or the default when absent. */
const count = (fallback: number) =>
  z
    .string()
    .regex(/^[1-9]\d*$/, 'expected a whole number ≥ 1')
    .transform(Number)
    .refine(Number.isSafeInteger, 'too large')
    .optional()
    .transform((n) => n ?? fallback)

function abuseBoundFields() {
  return {
    // durationMs refuses 0 (parseDuration does): a timeout of 0 would mean none at all in Node.
    requestTimeout: durationMs(10_000),
    connectionTimeout: durationMs(60_000),
    keepAliveTimeout: durationMs(72_000),
    maxConnections: count(10_000),
    memoryMaxKeys: count(100_000),
    memoryMaxBytes: count(64 * 1024 * 1024),
  }
}

function abuseBounds(o: {
  requestTimeout: number
  connectionTimeout: number
  keepAliveTimeout: number
  maxConnections: number
  memoryMaxKeys: number
  memoryMaxBytes: number
}): AbuseBounds {
  return {
    requestTimeoutMs: o.requestTimeout,
    connectionTimeoutMs: o.connectionTimeout,
    keepAliveTimeoutMs: o.keepAliveTimeout,
    maxConnections: o.maxConnections,
    memoryMaxKeys: o.memoryMaxKeys,
    memoryMaxBytes: o.memoryMaxBytes,
  }
}

// ── End of the abuse bounds block. ──

type RawOptions = Partial<Record<OptionName, string | boolean | string[]>>

/**
 * Reads the settings from `argv` (the arguments after `serve`) and `env`; a flag wins over its
 * variable. The rules path may also be the one positional argument. Throws FloodgateError
 * (INVALID_OPTION) naming the flag and variable when something is wrong.
 */
export function readSettings(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): Settings {
  // envoyproxy/ratelimit's variables (REDIS_URL, PORT, RUNTIME_ROOT, …) first become Floodgate's.
  const upstream = readUpstreamEnvironment(env)
  const raw = rawOptions(argv, upstream.env)
  const parsed = schema.safeParse(raw)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]
    const name = issue.path[0] as OptionName | undefined
    const where = name ? `--${SERVE_OPTIONS[name].flag} / ${SERVE_OPTIONS[name].env}` : 'options'
    throw new FloodgateError('INVALID_OPTION', `${where}: ${issue.message}`)
  }
  return { ...parsed.data, upstreamNotes: upstream.notes }
}

function rawOptions(argv: readonly string[], env: NodeJS.ProcessEnv): RawOptions {
  const options = Object.fromEntries(
    Object.values(SERVE_OPTIONS).map((o: OptionSpec) => [o.flag, { type: o.type, multiple: o.multiple ?? false }]),
  )
  const unknown = unknownFlagMessage(argv)
  if (unknown !== undefined) throw new FloodgateError('INVALID_OPTION', unknown)
  let values: Record<string, string | boolean | string[] | undefined>
  let positionals: string[]
  try {
    ;({ values, positionals } = parseArgs({ args: [...argv], options, allowPositionals: true, strict: true }) as {
      values: Record<string, string | boolean | string[] | undefined>
      positionals: string[]
    })
  } catch (error) {
    throw new FloodgateError('INVALID_OPTION', `${(error as Error).message}; run \`floodgate serve --help\` for the options`)
  }
  if (positionals.length > 1) {
    throw new FloodgateError('INVALID_OPTION', `unexpected arguments ${positionals.slice(1).join(' ')}; give one rules path`)
  }
  const raw: RawOptions = {}
  for (const [name, spec] of Object.entries(SERVE_OPTIONS) as [OptionName, OptionSpec][]) {
    const fromFlag = values[spec.flag]
    const fromEnv = env[spec.env]
    if (fromFlag !== undefined) raw[name] = fromFlag
    else if (fromEnv !== undefined && fromEnv !== '') {
      raw[name] =
        spec.type === 'boolean'
          ? parseBooleanEnv(fromEnv, spec.env)
          : spec.multiple
            ? fromEnv
                .split(',')
                .map((item) => item.trim())
                .filter(Boolean)
            : fromEnv
    }
  }
  if (raw.config === undefined && positionals[0] !== undefined) raw.config = positionals[0]
  return raw
}

function parseBooleanEnv(value: string, name: string): boolean {
  if (/^(1|t|true|yes|on)$/i.test(value)) return true // t/f: Go's ParseBool, for upstream's variables
  if (/^(0|f|false|no|off)$/i.test(value)) return false
  throw new FloodgateError('INVALID_OPTION', `${name}: expected true or false, got ${JSON.stringify(value)}`)
}

const port = (fallback: number) =>
  z
    .string()
    .regex(/^\d+$/, 'expected a port number')
    .transform(Number)
    .refine((n) => n <= 65_535, 'a port is at most 65535')
    .optional()
    .transform((n) => n ?? fallback)

const hostPortList = z
  .string()
  .transform((list, ctx) => {
    const nodes: HostPort[] = []
    for (const item of list
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)) {
      const match = /^(.+):(\d{1,5})$/.exec(item)
      if (!match) {
        ctx.addIssue({ code: 'custom', message: `expected host:port, got ${JSON.stringify(item)}` })
        return z.NEVER
      }
      nodes.push({ host: match[1].replace(/^\[(.*)\]$/, '$1'), port: Number(match[2]) })
    }
    if (nodes.length === 0) {
      ctx.addIssue({ code: 'custom', message: 'give at least one host:port' })
      return z.NEVER
    }
    return nodes
  })
  .optional()

const durationMs = (fallback: number) =>
  z
    .string()
    .optional()
    .transform((value, ctx) => {
      if (value === undefined) return fallback
      try {
        return parseDuration(/^\d+$/.test(value) ? Number(value) : value)
      } catch (error) {
        ctx.addIssue({ code: 'custom', message: (error as Error).message.replace(/^duration: /, '') })
        return z.NEVER
      }
    })

// --- Envoy drop-in: value readers of its settings ---
const headerName = (fallback: string) =>
  z
    .string()
    .regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, 'expected an HTTP header name (letters, digits, - and the like)')
    .optional()
    .transform((name) => name ?? fallback)

const wholeNumber = (fallback: number) =>
  z
    .string()
    .regex(/^[1-9]\d*$/, 'expected a whole number ≥ 1')
    .transform(Number)
    .optional()
    .transform((n) => n ?? fallback)

const schema = z
  .object({
    config: z.string({ error: 'required: the rules file or directory, e.g. --config rules.yaml' }).min(1),
    redisUrl: z
      .string()
      .regex(/^rediss?:\/\//, 'expected a redis:// or rediss:// URL')
      .optional(),
    redisCluster: hostPortList,
    redisSentinels: hostPortList,
    sentinelName: z.string().min(1).optional(),
    redisPrefix: z
      .string()
      .min(1)
      .optional()
      .transform((p) => p ?? 'fg:'),
    memcached: hostPortList,
    compatKeys: z.enum(['envoy'], { error: 'expected envoy' }).optional(),
    compatPrefix: z
      .string()
      .optional()
      .transform((p) => p ?? ''),
    redisPerSecond: z
      .string()
      .regex(/^rediss?:\/\//, 'expected a redis:// or rediss:// URL')
      .optional(),
    host: z
      .string()
      .min(1)
      .optional()
      .transform((h) => h ?? '0.0.0.0'),
    httpPort: port(8080),
    grpcPort: port(8081),
    adminToken: z.string().min(8, 'use a token of at least 8 characters').optional(),
    dashboardRawKeys: z.boolean().optional(),
    onStoreError: z.enum(['open', 'closed', 'local', 'error'], { error: 'expected open, closed, local or error' }).optional(),
    instances: z
      .string()
      .regex(/^[1-9]\d*$/, 'expected a whole number ≥ 1')
      .transform(Number)
      .optional()
      .transform((n) => n ?? 1),
    storeTimeout: optionalDurationMs,
    storeTimeoutMax: optionalDurationMs,
    logLevel: z
      .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], {
        error: 'expected fatal, error, warn, info, debug, trace or silent',
      })
      .optional()
      .transform((l) => l ?? 'info'),
    noWatch: z.boolean().optional(),
    bodyLimit: z
      .string()
      .regex(/^[1-9]\d*$/, 'expected a number of bytes')
      .transform(Number)
      .optional()
      .transform((n) => n ?? 65_536),
    grpcResponseHeaders: z.boolean().optional(),
    nearLimitRatio: z
      .string()
      .transform(Number)
      .refine((n) => n > 0 && n <= 1, 'expected a fraction in (0, 1], e.g. 0.8')
      .optional()
      .transform((n) => n ?? 0.8),
    shutdownTimeout: durationMs(10_000),
    ...abuseBoundFields(),
    ...guardFields(),

    // --- Envoy drop-in ---
    wildcardOrder: z
      .enum(['file', 'specific'], { error: 'expected file or specific' })
      .optional()
      .transform((o) => o ?? 'file'),
    limitHeader: headerName('RateLimit-Limit'),
    remainingHeader: headerName('RateLimit-Remaining'),
    resetHeader: headerName('RateLimit-Reset'),
    stopIncrement: z.boolean().optional(),
    globalShadowMode: z.boolean().optional(),
    globalQuotaMode: z.boolean().optional(),
    dynamicMetadata: z.boolean().optional(),
    maxDescriptors: wholeNumber(64),
    maxDescriptorEntries: wholeNumber(32),
    grpcMaxMessage: wholeNumber(65_536),
    upstreamMetrics: z.boolean().optional(),

    // Which servers run and how logs read (the CLI's first-hour options).
    noHttp: z.boolean().optional(),
    noGrpc: z.boolean().optional(),
    logFormat: z.enum(['pretty', 'json'], { error: 'expected pretty or json' }).optional(),

    // Several regions.
    region: z.string().regex(REGION_NAME, "expected a region name: letters, digits, '.', '_' or '-'").optional(),
    peer: z.array(peerEntry).optional(),
    regionInterval: durationMs(100),
    regionsFile: z.string().min(1).optional(),
  })
  .superRefine((o, ctx) => {
    const stores = [o.redisUrl, o.redisCluster, o.redisSentinels, o.memcached].filter((s) => s !== undefined).length
    const issue = (path: string, message: string) => ctx.addIssue({ code: 'custom', path: [path], message })
    if (stores > 1) issue('redisUrl', 'give only one of --redis, --redis-cluster, --redis-sentinel, --memcached')
    const timeout = storeTimeoutBounds(o.storeTimeout, o.storeTimeoutMax)
    if (typeof timeout === 'string') issue('storeTimeout', timeout)
    if (o.memcached && /[\s#|]/.test(o.redisPrefix)) issue('redisPrefix', "with --memcached: no spaces, '#' or '|'")
    if (o.compatKeys && stores === 0) {
      issue(
        'compatKeys',
        'shares counters with envoyproxy/ratelimit, so it needs its store: add --redis (or a Cluster, Sentinel) or --memcached',
      )
    }
    if (o.redisPerSecond && !o.compatKeys) issue('redisPerSecond', "holds upstream's per-second counters only: add --compat-keys envoy")
    if (o.redisPerSecond && o.memcached) issue('redisPerSecond', 'upstream keeps per-second counters apart only with Redis, not memcache')
    if (o.redisSentinels && !o.sentinelName)
      ctx.addIssue({
        code: 'custom',
        path: ['sentinelName'],
        message: 'required with --redis-sentinel: the master name the Sentinels watch',
      })
    if (o.sentinelName && !o.redisSentinels)
      ctx.addIssue({ code: 'custom', path: ['sentinelName'], message: 'only applies with --redis-sentinel' })
    if (o.noHttp && o.noGrpc)
      ctx.addIssue({ code: 'custom', path: ['noGrpc'], message: 'with --no-http too nothing would be served; keep one of HTTP and gRPC' })
    if (o.regionsFile && (o.region || o.peer))
      ctx.addIssue({ code: 'custom', path: ['regionsFile'], message: 'give either --regions-file or --region/--peer, not both' })
    if (o.peer && !o.region) ctx.addIssue({ code: 'custom', path: ['region'], message: "required with --peer: this region's name" })
    if ((o.region || o.regionsFile) && !o.redisUrl && !o.redisCluster && !o.redisSentinels) {
      ctx.addIssue({
        code: 'custom',
        path: [o.region ? 'region' : 'regionsFile'],
        message: 'regions keep their usage in Redis: give --redis, --redis-cluster or --redis-sentinel',
      })
    }
    const names = (o.peer ?? []).map(([name]) => name)
    const repeated = names.find((name, i) => names.indexOf(name) !== i)
    if (repeated) ctx.addIssue({ code: 'custom', path: ['peer'], message: `peer ${repeated} is given twice` })
    if (o.region && names.includes(o.region))
      ctx.addIssue({ code: 'custom', path: ['peer'], message: `peer ${o.region} is this region itself; list only the other regions` })
  })
  .transform(
    (o): Omit<Settings, 'upstreamNotes'> => ({
      config: o.config,
      store: o.redisUrl
        ? { kind: 'redis', url: o.redisUrl }
        : o.redisCluster
          ? { kind: 'cluster', nodes: o.redisCluster }
          : o.redisSentinels
            ? { kind: 'sentinel', sentinels: o.redisSentinels, name: o.sentinelName as string }
            : o.memcached
              ? { kind: 'memcached', servers: o.memcached.map(({ host, port }) => `${host}:${port}`) }
              : { kind: 'memory' },
      redisPrefix: o.redisPrefix,
      compatKeys: o.compatKeys,
      compatPrefix: o.compatPrefix,
      redisPerSecondUrl: o.redisPerSecond,
      host: o.host,
      httpPort: o.httpPort,
      grpcPort: o.grpcPort,
      adminToken: o.adminToken,
      dashboardRawKeys: o.dashboardRawKeys ?? false,
      onStoreError: o.onStoreError ?? 'open',
      instances: o.instances,
      ...(storeTimeoutBounds(o.storeTimeout, o.storeTimeoutMax) as StoreTimeoutMs),
      logLevel: o.logLevel,
      watch: !o.noWatch,
      bodyLimitBytes: o.bodyLimit,
      grpcResponseHeaders: o.grpcResponseHeaders ?? false,
      nearLimitRatio: o.nearLimitRatio,
      shutdownTimeoutMs: o.shutdownTimeout,
      ...abuseBounds(o),
      ...guardSettings(o),

      // --- Envoy drop-in ---
      envoyOnStoreError: o.onStoreError ?? 'error',
      wildcardOrder: o.wildcardOrder,
      responseHeaderNames: { limit: o.limitHeader, remaining: o.remainingHeader, reset: o.resetHeader },
      stopIncrementWhenOverLimit: o.stopIncrement ?? false,
      globalShadowMode: o.globalShadowMode ?? false,
      globalQuotaMode: o.globalQuotaMode ?? false,
      dynamicMetadata: o.dynamicMetadata ?? false,
      maxDescriptors: o.maxDescriptors,
      maxDescriptorEntries: o.maxDescriptorEntries,
      grpcMaxMessageBytes: o.grpcMaxMessage,
      upstreamMetrics: o.upstreamMetrics ?? false,

      // Which servers run and how logs read (the CLI's first-hour options).
      http: !o.noHttp,
      grpc: !o.noGrpc,
      logFormat: o.logFormat,

      regions: o.regionsFile
        ? readRegionsFile(o.regionsFile)
        : o.region
          ? { region: o.region, peers: Object.fromEntries(o.peer ?? []), intervalMs: o.regionInterval }
          : undefined,
    }),
  )
