// The zod schema of `floodgate serve`'s settings: raw flag and variable values in, a checked Settings out.

import { z } from 'zod'
import { peerEntry, readRegionsFile, REGION_NAME } from './region-settings.js'
import { storeTimeoutBounds, type StoreTimeoutMs } from './store-timeout.js'
import { guardFields, guardSettings } from './guard-settings.js'
import { grpcListenFields, grpcListenIssues, grpcListenSettings } from './grpc-listen-settings.js'
import { abuseBoundFields, abuseBounds } from './abuse-bounds.js'
import { memcacheSrvFields, memcacheSrvIssues, memcacheSrvSettings } from './memcache-srv-settings.js'
import { memcacheTls, memcacheTlsFields, memcacheTlsIssues } from './memcache-tls-settings.js'
import { MAX_EXPIRY_JITTER_S, UPSTREAM_EXPIRY_JITTER_S } from './compat-expiry.js'
import { parseRedisAuth, redisAuthFields, redisAuthIssues } from './redis-auth-settings.js'
import { redisTlsFields, redisTlsIssue, redisTlsSettings, redisUrl } from './redis-tls-settings.js'
import { durationMs, headerName, hostPortList, optionalDurationMs, port, wholeNumber } from './setting-values.js'
import type { Settings } from './settings-types.js'

export const schema = z
  .object({
    config: z.string({ error: 'required: the rules file or directory, e.g. --config rules.yaml' }).min(1),
    redisUrl,
    redisCluster: hostPortList,
    redisSentinels: hostPortList,
    sentinelName: z.string().min(1).optional(),
    redisPrefix: z
      .string()
      .min(1)
      .optional()
      .transform((p) => p ?? 'fg:'),
    memcached: hostPortList,
    ...memcacheSrvFields(),
    ...memcacheTlsFields(),
    compatKeys: z.enum(['envoy'], { error: 'expected envoy' }).optional(),
    compatPrefix: z
      .string()
      .optional()
      .transform((p) => p ?? ''),
    redisPerSecond: redisUrl,
    compatExpiryJitter: z
      .string()
      .regex(/^\d+$/, 'expected a whole number of seconds')
      .transform(Number)
      .refine((n) => n <= MAX_EXPIRY_JITTER_S, `expected at most ${MAX_EXPIRY_JITTER_S} seconds (a year)`)
      .optional()
      .transform((n) => n ?? UPSTREAM_EXPIRY_JITTER_S),
    ...redisTlsFields(),
    ...redisAuthFields(),
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
    ...grpcListenFields(),

    // --- Envoy drop-in ---
    mergeDomains: z.boolean().optional(),
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
    const memcached = o.memcached ?? o.memcacheSrv
    const stores = [o.redisUrl, o.redisCluster, o.redisSentinels, memcached].filter((s) => s !== undefined).length
    const issue = (path: string, message: string) => ctx.addIssue({ code: 'custom', path: [path], message })
    grpcListenIssues(o, issue)
    memcacheSrvIssues(o, issue)
    memcacheTlsIssues(o, issue)
    redisAuthIssues(o, issue)
    if (stores > 1) issue('redisUrl', 'give only one of --redis, --redis-cluster, --redis-sentinel, --memcached')
    const timeout = storeTimeoutBounds(o.storeTimeout, o.storeTimeoutMax)
    if (typeof timeout === 'string') issue('storeTimeout', timeout)
    if (memcached && /[\s#|]/.test(o.redisPrefix)) issue('redisPrefix', "with --memcached: no spaces, '#' or '|'")
    if (o.compatKeys && stores === 0) {
      issue(
        'compatKeys',
        'shares counters with envoyproxy/ratelimit, so it needs its store: add --redis (or a Cluster, Sentinel) or --memcached',
      )
    }
    if (o.redisPerSecond && !o.compatKeys) issue('redisPerSecond', "holds upstream's per-second counters only: add --compat-keys envoy")
    if (o.redisPerSecond && memcached) issue('redisPerSecond', 'upstream keeps per-second counters apart only with Redis, not memcache')
    const tlsIssue = redisTlsIssue(o)
    if (tlsIssue) issue(...tlsIssue)
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
          ? { kind: 'cluster', nodes: o.redisCluster, ...(o.redisAuth !== undefined && { auth: parseRedisAuth(o.redisAuth) }) }
          : o.redisSentinels
            ? {
                kind: 'sentinel',
                sentinels: o.redisSentinels,
                name: o.sentinelName as string,
                ...(o.redisAuth !== undefined && { auth: parseRedisAuth(o.redisAuth) }),
                ...(o.redisSentinelAuth !== undefined && { sentinelAuth: parseRedisAuth(o.redisSentinelAuth) }),
              }
            : o.memcached
              ? { kind: 'memcached', servers: o.memcached.map(({ host, port }) => `${host}:${port}`), ...memcacheTls(o) }
              : o.memcacheSrv
                ? { kind: 'memcached', servers: [], srv: memcacheSrvSettings(o), ...memcacheTls(o) }
                : { kind: 'memory' },
      redisPrefix: o.redisPrefix,
      compatKeys: o.compatKeys,
      compatPrefix: o.compatPrefix,
      redisPerSecondUrl: o.redisPerSecond,
      compatExpiryJitterSeconds: o.compatExpiryJitter,
      redisTls: redisTlsSettings(o),
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
      ...grpcListenSettings(o),

      // --- Envoy drop-in ---
      envoyOnStoreError: o.onStoreError ?? 'error',
      wildcardOrder: o.wildcardOrder,
      mergeDomains: o.mergeDomains ?? false,
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
