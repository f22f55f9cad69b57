// Settings of `floodgate serve`: every option from a CLI flag or an environment variable, read once and validated.

import { parseArgs } from 'node:util'
import { z } from 'zod'
import { FloodgateError, parseDuration } from 'floodgate'

/** Where rate-limit state lives. */
export type StoreSettings =
  | { kind: 'memory' }
  | { kind: 'redis'; url: string }
  | { kind: 'cluster'; nodes: HostPort[] }
  | { kind: 'sentinel'; sentinels: HostPort[]; name: string }

export interface HostPort {
  host: string
  port: number
}

/** Everything the service can be told; nothing else reads flags or the environment. */
export interface Settings {
  /** The rules: one YAML file or a directory of them. */
  config: string
  store: StoreSettings
  /** Key prefix in Redis, so several deployments can share one Redis. */
  redisPrefix: string
  host: string
  /** 0 picks a free port (tests). */
  httpPort: number
  grpcPort: number
  /** Bearer token for `/admin`; undefined disables the admin API (404). */
  adminToken: string | undefined
  onStoreError: 'open' | 'closed' | 'local'
  /** For `local`: how many service instances share the limits. */
  instances: number
  /** Longest wait for the store per decision. */
  storeTimeoutMs: number
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

  // Which servers run and how logs read (the CLI's first-hour options).
  /** Serve the HTTP API (false: `--no-http`, gRPC only). */
  http: boolean
  /** Serve Envoy's gRPC API (false: `--no-grpc`, HTTP only). */
  grpc: boolean
  /** `pretty` (human-readable) or `json` (one object per line); undefined: pretty on a terminal, JSON otherwise. */
  logFormat: 'pretty' | 'json' | undefined
}

/** One option: its flag, its environment variable, and whether it takes a value. */
interface OptionSpec {
  flag: string
  env: string
  type: 'string' | 'boolean'
  help: string
}

/** The options of `floodgate serve`, for parsing and for `--help`. */
export const SERVE_OPTIONS = {
  config: { flag: 'config', env: 'FLOODGATE_CONFIG', type: 'string', help: 'rules file or directory (required)' },
  redisUrl: { flag: 'redis', env: 'FLOODGATE_REDIS_URL', type: 'string', help: 'Redis URL, e.g. redis://localhost:6379' },
  redisCluster: { flag: 'redis-cluster', env: 'FLOODGATE_REDIS_CLUSTER', type: 'string', help: 'Redis Cluster seed nodes host:port,…' },
  redisSentinels: { flag: 'redis-sentinel', env: 'FLOODGATE_REDIS_SENTINELS', type: 'string', help: 'Redis Sentinels host:port,…' },
  sentinelName: { flag: 'sentinel-name', env: 'FLOODGATE_REDIS_SENTINEL_NAME', type: 'string', help: 'master name the Sentinels watch' },
  redisPrefix: { flag: 'redis-prefix', env: 'FLOODGATE_REDIS_PREFIX', type: 'string', help: 'key prefix in Redis (default fg:)' },
  host: { flag: 'host', env: 'FLOODGATE_HOST', type: 'string', help: 'address to listen on (default 0.0.0.0)' },
  httpPort: { flag: 'http-port', env: 'FLOODGATE_HTTP_PORT', type: 'string', help: 'HTTP port (default 8080; 0 = any free port)' },
  grpcPort: { flag: 'grpc-port', env: 'FLOODGATE_GRPC_PORT', type: 'string', help: 'gRPC port (default 8081; 0 = any free port)' },
  adminToken: { flag: 'admin-token', env: 'FLOODGATE_ADMIN_TOKEN', type: 'string', help: 'bearer token enabling /admin' },
  onStoreError: { flag: 'on-store-error', env: 'FLOODGATE_ON_STORE_ERROR', type: 'string', help: 'open | closed | local (default open)' },
  instances: { flag: 'instances', env: 'FLOODGATE_INSTANCES', type: 'string', help: 'instances sharing the limits, for local fallback (default 1)' },
  storeTimeout: { flag: 'store-timeout', env: 'FLOODGATE_STORE_TIMEOUT', type: 'string', help: 'longest wait for the store (default 100ms)' },
  logLevel: { flag: 'log-level', env: 'FLOODGATE_LOG_LEVEL', type: 'string', help: 'fatal|error|warn|info|debug|trace|silent (default info)' },
  noWatch: { flag: 'no-watch', env: 'FLOODGATE_NO_WATCH', type: 'boolean', help: 'do not reload rules when files change' },
  bodyLimit: { flag: 'body-limit', env: 'FLOODGATE_BODY_LIMIT', type: 'string', help: 'largest HTTP body in bytes (default 65536)' },
  grpcResponseHeaders: { flag: 'grpc-response-headers', env: 'FLOODGATE_GRPC_RESPONSE_HEADERS', type: 'boolean', help: 'add RateLimit headers to gRPC answers' },
  nearLimitRatio: { flag: 'near-limit-ratio', env: 'FLOODGATE_NEAR_LIMIT_RATIO', type: 'string', help: 'share of a limit counted as near_limit (default 0.8)' },
  shutdownTimeout: { flag: 'shutdown-timeout', env: 'FLOODGATE_SHUTDOWN_TIMEOUT', type: 'string', help: 'longest graceful drain (default 10s)' },

  // Which servers run and how logs read (the CLI's first-hour options).
  noHttp: { flag: 'no-http', env: 'FLOODGATE_NO_HTTP', type: 'boolean', help: 'serve gRPC only (no HTTP API, no /metrics)' },
  noGrpc: { flag: 'no-grpc', env: 'FLOODGATE_NO_GRPC', type: 'boolean', help: 'serve HTTP only (no Envoy gRPC API)' },
  logFormat: { flag: 'log-format', env: 'FLOODGATE_LOG_FORMAT', type: 'string', help: 'pretty | json (default pretty on a terminal, else json)' },
} as const satisfies Record<string, OptionSpec>

type OptionName = keyof typeof SERVE_OPTIONS
type RawOptions = Partial<Record<OptionName, string | boolean>>

/**
 * Reads the settings from `argv` (the arguments after `serve`) and `env`; a flag wins over its
 * variable. The rules path may also be the one positional argument. Throws FloodgateError
 * (INVALID_OPTION) naming the flag and variable when something is wrong.
 */
export function readSettings(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): Settings {
  const raw = rawOptions(argv, env)
  const parsed = schema.safeParse(raw)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]
    const name = issue.path[0] as OptionName | undefined
    const where = name ? `--${SERVE_OPTIONS[name].flag} / ${SERVE_OPTIONS[name].env}` : 'options'
    throw new FloodgateError('INVALID_OPTION', `${where}: ${issue.message}`)
  }
  return parsed.data
}

/** The help text of `floodgate serve`. */
export function serveUsage(): string {
  const lines = Object.values(SERVE_OPTIONS).map((o) => {
    const flag = `--${o.flag}${o.type === 'string' ? ' <value>' : ''}`
    return `  ${flag.padEnd(32)} ${o.env.padEnd(32)} ${o.help}`
  })
  return ['Usage: floodgate serve --config <file|dir> [options]', '', '  flag                             environment variable', ...lines].join('\n')
}

function rawOptions(argv: readonly string[], env: NodeJS.ProcessEnv): RawOptions {
  const options = Object.fromEntries(Object.values(SERVE_OPTIONS).map((o) => [o.flag, { type: o.type }]))
  let values: Record<string, string | boolean | undefined>
  let positionals: string[]
  try {
    ;({ values, positionals } = parseArgs({ args: [...argv], options, allowPositionals: true, strict: true }) as {
      values: Record<string, string | boolean | undefined>
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
    else if (fromEnv !== undefined && fromEnv !== '') raw[name] = spec.type === 'boolean' ? parseBooleanEnv(fromEnv, spec.env) : fromEnv
  }
  if (raw.config === undefined && positionals[0] !== undefined) raw.config = positionals[0]
  return raw
}

function parseBooleanEnv(value: string, name: string): boolean {
  if (/^(1|true|yes|on)$/i.test(value)) return true
  if (/^(0|false|no|off)$/i.test(value)) return false
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
    for (const item of list.split(',').map((s) => s.trim()).filter(Boolean)) {
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

const schema = z
  .object({
    config: z.string({ error: 'required: the rules file or directory, e.g. --config rules.yaml' }).min(1),
    redisUrl: z.string().regex(/^rediss?:\/\//, 'expected a redis:// or rediss:// URL').optional(),
    redisCluster: hostPortList,
    redisSentinels: hostPortList,
    sentinelName: z.string().min(1).optional(),
    redisPrefix: z.string().min(1).optional().transform((p) => p ?? 'fg:'),
    host: z.string().min(1).optional().transform((h) => h ?? '0.0.0.0'),
    httpPort: port(8080),
    grpcPort: port(8081),
    adminToken: z.string().min(8, 'use a token of at least 8 characters').optional(),
    onStoreError: z.enum(['open', 'closed', 'local'], { error: 'expected open, closed or local' }).optional().transform((m) => m ?? 'open'),
    instances: z.string().regex(/^[1-9]\d*$/, 'expected a whole number ≥ 1').transform(Number).optional().transform((n) => n ?? 1),
    storeTimeout: durationMs(100),
    logLevel: z
      .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], { error: 'expected fatal, error, warn, info, debug, trace or silent' })
      .optional()
      .transform((l) => l ?? 'info'),
    noWatch: z.boolean().optional(),
    bodyLimit: z.string().regex(/^[1-9]\d*$/, 'expected a number of bytes').transform(Number).optional().transform((n) => n ?? 65_536),
    grpcResponseHeaders: z.boolean().optional(),
    nearLimitRatio: z
      .string()
      .transform(Number)
      .refine((n) => n > 0 && n <= 1, 'expected a fraction in (0, 1], e.g. 0.8')
      .optional()
      .transform((n) => n ?? 0.8),
    shutdownTimeout: durationMs(10_000),

    // Which servers run and how logs read (the CLI's first-hour options).
    noHttp: z.boolean().optional(),
    noGrpc: z.boolean().optional(),
    logFormat: z.enum(['pretty', 'json'], { error: 'expected pretty or json' }).optional(),
  })
  .superRefine((o, ctx) => {
    const stores = [o.redisUrl, o.redisCluster, o.redisSentinels].filter((s) => s !== undefined).length
    if (stores > 1) ctx.addIssue({ code: 'custom', path: ['redisUrl'], message: 'give only one of --redis, --redis-cluster, --redis-sentinel' })
    if (o.redisSentinels && !o.sentinelName) ctx.addIssue({ code: 'custom', path: ['sentinelName'], message: 'required with --redis-sentinel: the master name the Sentinels watch' })
    if (o.sentinelName && !o.redisSentinels) ctx.addIssue({ code: 'custom', path: ['sentinelName'], message: 'only applies with --redis-sentinel' })
    if (o.noHttp && o.noGrpc) ctx.addIssue({ code: 'custom', path: ['noGrpc'], message: 'with --no-http too nothing would be served; keep one of HTTP and gRPC' })
  })
  .transform(
    (o): Settings => ({
      config: o.config,
      store: o.redisUrl
        ? { kind: 'redis', url: o.redisUrl }
        : o.redisCluster
          ? { kind: 'cluster', nodes: o.redisCluster }
          : o.redisSentinels
            ? { kind: 'sentinel', sentinels: o.redisSentinels, name: o.sentinelName as string }
            : { kind: 'memory' },
      redisPrefix: o.redisPrefix,
      host: o.host,
      httpPort: o.httpPort,
      grpcPort: o.grpcPort,
      adminToken: o.adminToken,
      onStoreError: o.onStoreError,
      instances: o.instances,
      storeTimeoutMs: o.storeTimeout,
      logLevel: o.logLevel,
      watch: !o.noWatch,
      bodyLimitBytes: o.bodyLimit,
      grpcResponseHeaders: o.grpcResponseHeaders ?? false,
      nearLimitRatio: o.nearLimitRatio,
      shutdownTimeoutMs: o.shutdownTimeout,

      // Which servers run and how logs read (the CLI's first-hour options).
      http: !o.noHttp,
      grpc: !o.noGrpc,
      logFormat: o.logFormat,
    }),
  )
