// Starts and stops the whole service: rules (watched), store, limiter, HTTP and gRPC servers, metrics wiring.

import { pino, type Logger } from 'pino'
import { FloodgateError, RateLimiter, type Store } from 'floodgate'
import { MemcachedStore } from 'floodgate/memcached'
import { formatIssue } from 'floodgate/rules'
import { createServiceDashboard } from './dashboard.js'
import { EnvoyCompatStore } from './compat-keys.js'
import { createStore } from './create-store.js'
import { lookupAtStart, MemcacheSrvRefresh, srvResolver } from './memcache-srv.js'
import { MemcacheUpstreamCounter } from './memcache-upstream-counter.js'
import { Decider } from './decide.js'
import { createGrpcServer } from './grpc-server.js'
import { openRules, type RulesSource } from './rules-source.js'
import { createHttpServer, type HealthReport } from './http-server.js'
import { ServiceMetrics } from './metrics.js'
import { countRules, ruleIds } from './rule-count.js'
import { LazyRedisStore } from './lazy-redis-store.js'
import type { Settings } from './settings.js'
import { limiterTimeout } from './store-timeout.js'
import { registerConnectionMetrics } from './connection-metrics.js'
import { startTelemetry } from './telemetry.js'
import { ConnectionTracker, LISTEN_BACKLOG, SYSTEM_TIMERS, type ShutdownTimers } from './shutdown.js'

/** Longest wait for the store to confirm its close (QUIT takes milliseconds when the server is there). */
const STORE_CLOSE_MS = 2_000

/** A started service. */
export interface RunningService {
  /** Base URL to call the HTTP API on this machine, e.g. `http://127.0.0.1:8080` (loopback when bound to all interfaces). */
  readonly httpUrl: string
  /** The HTTP address as bound, e.g. `http://0.0.0.0:8080`: what the banner shows, so exposure is never understated. */
  readonly httpBindUrl: string
  /** Bound to every interface (`0.0.0.0` or `::`): reachable from other hosts, not only this one. */
  readonly allInterfaces: boolean
  readonly httpPort: number
  /** `host:port` of the gRPC server. */
  readonly grpcAddress: string
  readonly grpcPort: number
  /** Which servers listen (`--no-http`, `--no-grpc`); the address of one that does not throws. */
  readonly serving: { readonly http: boolean; readonly grpc: boolean }
  readonly metrics: ServiceMetrics
  readonly logger: Logger
  /** Re-reads the rules now (SIGHUP); false when they are invalid and the previous ones keep serving. */
  reloadRules(): boolean
  /**
   * True once rules are loaded: always with a rules file (the service does not start without one);
   * with CONFIG_TYPE=GRPC_XDS_SOTW, once the management server's first config was accepted.
   */
  rulesLoaded(): boolean
  /**
   * Graceful shutdown: stop accepting, close idle keep-alive sockets at once, answer requests in
   * flight (with `Connection: close`) and return as soon as they are done, cutting what is left at
   * the shutdown timeout; then close the rule watcher, the limiter and the store. Safe to call twice.
   */
  close(): Promise<void>
}

export interface StartOptions {
  /** Log here instead of a new pino logger on stdout (tests pass a silent one). */
  logger?: Logger
  /** Timers for the shutdown deadline (default the system's); tests pass ones they fire by hand. */
  timers?: ShutdownTimers
  /** Timers of the gRPC connections' age (--grpc-max-connection-age; default the system's); tests fire them by hand. */
  connectionAgeTimers?: ShutdownTimers
  /**
   * Milliseconds since the epoch for the limiter and the embedded and memcached stores (default
   * Date.now); tests freeze it. A Redis store decides on its server's clock.
   */
  clock?: () => number
}

/**
 * Starts everything `settings` describe and resolves once both servers listen. Rejects (with
 * ConfigError for bad rules) if anything cannot start; whatever had started is closed again.
 */
export async function startService(given: Settings, options: StartOptions = {}): Promise<RunningService> {
  const logger = options.logger ?? pino({ level: given.logLevel, base: { service: 'floodgate' } })
  // MEMCACHE_SRV: the servers are looked up first; without them the service does not start.
  const srv = given.store.kind === 'memcached' ? given.store.srv : undefined
  const resolver = srv === undefined ? undefined : srvResolver(srv.dnsServers)
  const settings: Settings =
    srv === undefined || resolver === undefined
      ? given
      : { ...given, store: { ...given.store, kind: 'memcached', srv, servers: await lookupAtStart(srv, resolver) } }
  if (srv !== undefined && settings.store.kind === 'memcached')
    logger.info({ servers: settings.store.servers }, `memcached servers from SRV record ${srv.name}`)
  const telemetry = await startTelemetry(settings, logger)
  const metrics = new ServiceMetrics({ upstreamNames: settings.upstreamMetrics, listener: telemetry.statsd })
  for (const note of settings.upstreamNotes) logger.info(note)
  let rules: RulesSource
  try {
    rules = await openRules(settings, logger, metrics)
  } catch (error) {
    await telemetry.close()
    throw error
  }
  // The dashboard is served behind the admin token: without one nothing is collected.
  let storeLatency: ((ms: number) => void) | undefined
  const store = createStore(
    settings,
    (ms) => storeLatency?.(ms),
    options.clock,
    (message, cause) => logger.error({ cause }, message),
  )
  // --compat-keys wraps the region's store: upstream-format rules count on upstream's keys, the rest
  // (rules with `regions` among them) go through the region sync inside.
  const own = store instanceof EnvoyCompatStore ? store.inner : store
  const srvRefresh =
    srv !== undefined && resolver !== undefined && srv.refreshMs > 0 && own instanceof MemcachedStore
      ? new MemcacheSrvRefresh(own, srv, resolver, logger, metrics.registry, upstreamCounterMove(store))
      : undefined
  const regionStatus = () => (own instanceof LazyRedisStore ? own.regionStatus() : undefined)
  if (own instanceof LazyRedisStore && settings.regions !== undefined) {
    // Made now, not at the first decision: the sync loop and /readyz's view of the peers start with the service.
    await own.start()
    metrics.watchRegions(regionStatus)
  }
  // `error` is decided by the Decider from the limiter's fail-open answer (marked as a fallback).
  const limiterMode = (mode: Settings['onStoreError']) => (mode === 'error' ? 'open' : mode)
  const limiter = new RateLimiter({
    store,
    onStoreError: limiterMode(settings.onStoreError),
    instances: settings.instances,
    timeout: limiterTimeout(settings),
    ...(options.clock === undefined ? {} : { clock: options.clock }),
    ...(telemetry.tracing === undefined ? {} : { onStoreCall: telemetry.tracing.onStoreCall }),
  })
  metrics.watchSync(() => limiter.syncState())
  // The shards whose breaker is open ('' for a store that is one shard): a handful at most.
  const openShards = new Set<string>()
  wireLimiterEvents(limiter, metrics, logger, (open, shard) => (open ? openShards.add(shard) : openShards.delete(shard)))
  const dashboard =
    settings.adminToken === undefined
      ? undefined
      : createServiceDashboard({
          limiter,
          storeKind: settings.store.kind,
          rawKeys: settings.dashboardRawKeys ?? false,
          regions: regionStatus,
          config: () => ({
            rules: countRules(rules.current),
            files: rules.current.files,
            lastReloadError: rules.lastError?.issues.map(formatIssue) ?? null,
            ids: ruleIds(rules.current),
          }),
        })
  storeLatency = dashboard?.storeLatency

  let draining = false
  const decider = new Decider({
    rules: () => rules.current,
    limiter,
    metrics,
    nearLimitRatio: settings.nearLimitRatio,
    stopIncrementWhenOverLimit: settings.stopIncrementWhenOverLimit,
    globalShadowMode: settings.globalShadowMode,
    globalQuotaMode: settings.globalQuotaMode,
    maxDescriptors: settings.maxDescriptors,
    maxEntries: settings.maxDescriptorEntries,
    logger,
    observer: dashboard?.observe,
  })
  const responseHeaders = settings.grpcResponseHeaders ? settings.responseHeaderNames : undefined
  const envoyStoreError = settings.envoyOnStoreError === 'error' ? 'error' : 'answer'
  const health = (): HealthReport => ({
    ready: !draining,
    storeReachable: !openShards.has('') && storeConnected(store),
    shardsUnreachable: [...openShards].filter((shard) => shard !== ''),
    onStoreError: settings.onStoreError,
    rules: [...rules.current.files],
    rulesLoaded: rules.loaded ?? true,
    rulesError: rules.lastError?.issues.map(formatIssue),
    peersUnreachable: regionStatus()?.degraded,
  })
  // --health-check-store (upstream's REDIS_HEALTH_CHECK_ACTIVE_CONNECTION): gRPC health and /healthcheck
  // fail while the store's connection is down. The connection, not the breaker: a breaker closes only
  // on a decision, and traffic this health moved away would never come back to close it.
  // --health-requires-rules (HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED): likewise until xDS sent a config.
  const serving = () =>
    !draining && (!settings.healthCheckStore || storeConnected(store)) && (!settings.healthRequiresRules || rules.loaded !== false)
  const closeBackends = async () => {
    srvRefresh?.close()
    dashboard?.close()
    await rules.close()
    await limiter.close()
    // Bounded: a store whose server is gone may never confirm its close, and shutdown must end.
    await within(store.close(), Math.min(settings.shutdownTimeoutMs, STORE_CLOSE_MS))
    // Bounded too: an OTLP receiver or statsd server that is gone must not hold shutdown.
    await within(telemetry.close(), settings.shutdownTimeoutMs)
  }
  const http = createHttpServer({
    decider,
    metrics,
    logger,
    bodyLimitBytes: settings.bodyLimitBytes,
    requestTimeoutMs: settings.requestTimeoutMs,
    connectionTimeoutMs: settings.connectionTimeoutMs,
    keepAliveTimeoutMs: settings.keepAliveTimeoutMs,
    adminToken: settings.adminToken,
    describeRules: () => rules.current.describe(),
    health,
    serving,
    dashboard: dashboard?.collector,
    envoy: { responseHeaders, dynamicMetadata: settings.dynamicMetadata, storeError: envoyStoreError },
    checkStoreError: settings.onStoreError === 'error' ? 'error' : 'answer',
    tracing: telemetry.tracing,
  })
  // Built after the HTTP server and the backends: a TLS pair that does not load throws here, and what
  // had started must be closed, or its timers and sockets keep the process alive.
  const grpc = await (async () => {
    try {
      return createGrpcServer({
        decider,
        metrics,
        logger,
        isReady: serving,
        responseHeaders,
        dynamicMetadata: settings.dynamicMetadata,
        storeError: envoyStoreError,
        maxMessageBytes: settings.grpcMaxMessageBytes,
        tracing: telemetry.tracing,
        limits: {
          maxConnections: settings.grpcMaxConnections,
          idleTimeoutMs: settings.grpcIdleTimeoutMs,
          handshakeTimeoutMs: settings.grpcHandshakeTimeoutMs,
          keepaliveMinTimeMs: settings.grpcKeepaliveMinTimeMs,
          maxConcurrentStreams: settings.grpcMaxConcurrentStreams,
          closeBatch: settings.grpcCloseBatch,
        },
        awaitSettings: settings.grpcAwaitSettings,
        tls: settings.grpcTls,
        connectionAge: { maxAgeMs: settings.grpcMaxConnectionAgeMs, graceMs: settings.grpcMaxConnectionAgeGraceMs },
        timers: options.connectionAgeTimers,
      })
    } catch (error) {
      await http.close()
      await closeBackends()
      throw error
    }
  })()
  const connections = new ConnectionTracker(http.server, settings.maxConnections)
  registerConnectionMetrics(metrics.registry, { http: () => connections.stats(), grpc: () => grpc.connections() })
  const timers = options.timers ?? SYSTEM_TIMERS

  let httpUrl: string | undefined
  let grpcPort: number | undefined
  try {
    // --no-http / --no-grpc: the server is built (closing it is then the same) but never listens.
    // gRPC binds first: it logs nothing when it does, so a taken HTTP port leaves the failure the only line.
    if (settings.grpc)
      grpcPort = await grpc.listen(
        settings.grpcSocket === undefined ? { host: settings.host, port: settings.grpcPort } : { path: settings.grpcSocket },
      )
    if (settings.http) httpUrl = await http.listen({ host: settings.host, port: settings.httpPort, backlog: LISTEN_BACKLOG })
  } catch (error) {
    await http.close()
    await grpc.close(0)
    await closeBackends()
    throw error
  }
  const host = settings.host.includes(':') ? `[${settings.host}]` : settings.host
  const httpPort = httpUrl === undefined ? undefined : (http.server.address() as { port: number }).port
  const httpBindUrl = httpPort === undefined ? undefined : `http://${host}:${httpPort}`
  // grpc-js's own form of a unix socket address, so the address logged is the one a client dials.
  const grpcAddress =
    grpcPort === undefined ? undefined : settings.grpcSocket !== undefined ? `unix:${settings.grpcSocket}` : `${host}:${grpcPort}`
  const allInterfaces = settings.host === '0.0.0.0' || settings.host === '::' || settings.host === '[::]'
  logger.info(
    { http: httpBindUrl ?? 'off', grpc: grpcAddress ?? 'off', allInterfaces, store: settings.store.kind, rules: rules.current.files },
    'floodgate listening',
  )

  let closing: Promise<void> | undefined
  const close = () =>
    (closing ??= (async () => {
      draining = true
      logger.info('shutting down: draining in-flight requests')
      await Promise.all([closeHttp(http, connections, settings.shutdownTimeoutMs, timers), grpc.close(settings.shutdownTimeoutMs, timers)])
      await closeBackends()
      logger.info('stopped')
    })())
  const off = (server: 'HTTP' | 'gRPC') =>
    new FloodgateError('INVALID_OPTION', `${server} is off (--no-${server.toLowerCase()}): it has no address`)
  return {
    get httpUrl() {
      if (httpUrl === undefined) throw off('HTTP')
      return httpUrl
    },
    get httpBindUrl() {
      if (httpBindUrl === undefined) throw off('HTTP')
      return httpBindUrl
    },
    get httpPort() {
      if (httpPort === undefined) throw off('HTTP')
      return httpPort
    },
    get grpcAddress() {
      if (grpcAddress === undefined) throw off('gRPC')
      return grpcAddress
    },
    get grpcPort() {
      if (grpcPort === undefined) throw off('gRPC')
      return grpcPort
    },
    allInterfaces,
    serving: { http: httpUrl !== undefined, grpc: grpcPort !== undefined },
    metrics,
    logger,
    reloadRules: () => rules.reload(),
    rulesLoaded: () => rules.loaded ?? true,
    close,
  }
}

function storeConnected(store: Store): boolean {
  if (store instanceof EnvoyCompatStore) return storeConnected(store.inner)
  return store instanceof LazyRedisStore ? store.connected : true
}

function wireLimiterEvents(
  limiter: RateLimiter,
  metrics: ServiceMetrics,
  logger: Logger,
  setBreaker: (open: boolean, shard: string) => void,
): void {
  limiter.on('store-error', (error) => {
    metrics.recordStoreError()
    logger.warn({ err: error }, 'store call failed')
  })
  limiter.on('breaker-open', (shard) => {
    setBreaker(true, shard)
    metrics.setBreakerOpen(true, shard)
    if (shard === '') logger.error('store unreachable: circuit breaker open, deciding in the failure mode')
    else logger.error({ shard }, `store shard ${shard} unreachable: its keys are decided in the failure mode, the others by the store`)
  })
  limiter.on('breaker-close', (shard) => {
    setBreaker(false, shard)
    metrics.setBreakerOpen(false, shard)
    if (shard === '') logger.info('store reachable again: circuit breaker closed')
    else logger.info({ shard }, `store shard ${shard} reachable again: circuit breaker closed`)
  })
  limiter.on('fallback', (source) => {
    metrics.recordFallback(source === 'fallback-closed' ? 'closed' : source === 'fallback-local' ? 'local' : 'open')
  })
}

/**
 * Stops the listener and drains: idle sockets close now, busy ones after their answer; at the
 * deadline every socket is cut. Resolves when the last socket is gone.
 */
async function closeHttp(
  app: ReturnType<typeof createHttpServer>,
  connections: ConnectionTracker,
  timeoutMs: number,
  timers: ShutdownTimers,
): Promise<void> {
  const force = timers.setTimeout(() => connections.destroyAll(), timeoutMs)
  try {
    const closed = app.close()
    connections.drain()
    await closed
  } finally {
    timers.clearTimeout(force)
  }
}

/** Waits for `work`, but no longer than `ms`. */
async function within(work: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  try {
    await Promise.race([work, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))])
  } finally {
    clearTimeout(timer)
  }
}

/** With --compat-keys envoy on memcached: moves upstream's counters to each new list, as upstream's client moves. */
function upstreamCounterMove(store: Store): ((servers: readonly string[]) => void) | undefined {
  const counter = store instanceof EnvoyCompatStore ? store.counter : undefined
  return counter instanceof MemcacheUpstreamCounter ? (servers) => counter.setServers(servers) : undefined
}
