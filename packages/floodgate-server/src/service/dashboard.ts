// The service's /dashboard: floodgate/dashboard's collector fed per rule by the Decider, and its page on the Fastify app.

import { createRequire } from 'node:module'
import type { FastifyInstance } from 'fastify'
import type { RateLimiter } from 'floodgate'
import type { RegionSyncStatus } from 'floodgate/redis'
import { DashboardCollector, dashboardHandler, type ConfigState, type DashboardHandler } from 'floodgate/dashboard'
import type { HitCounts } from './metrics.js'

export interface ServiceDashboardOptions {
  limiter: RateLimiter
  /** `memory`, `redis`, `cluster` or `sentinel`. */
  storeKind: string
  /** The active rules: their count, files and the last reload error. */
  config: () => ConfigState
  /** Show keys as they are instead of their hash (`--dashboard-raw-keys`). */
  rawKeys: boolean
  /** The links to peer regions, with `--region` (undefined otherwise). */
  regions?: () => RegionSyncStatus | undefined
}

/** The collector and what feeds it; the server hands `observe` to the Decider and `storeLatency` to its Redis store. */
export interface ServiceDashboard {
  readonly collector: DashboardCollector
  /** A limited descriptor's hits, as the per-rule metrics count them: the dashboard's totals equal theirs. */
  observe(metricKey: string, storeKey: string, counts: HitCounts): void
  /** One store call's duration in ms. */
  storeLatency(ms: number): void
  /** Stops listening to the limiter. */
  close(): void
}

/** Creates the collector and subscribes it to the limiter's store events (decisions come from the Decider, per rule). */
export function createServiceDashboard(options: ServiceDashboardOptions): ServiceDashboard {
  const keys = options.rawKeys ? 'raw' : 'hashed'
  const collector = new DashboardCollector({ storeKind: options.storeKind, config: options.config, keys, regions: options.regions })
  const stop = collector.watch(options.limiter, { decisions: false })
  return {
    collector,
    // Allowed and denied as floodgate_within_limit and floodgate_over_limit count them (a shadow rule's
    // would-be denials included), so the page's totals and a scrape of /metrics agree.
    observe: (metricKey, storeKey, counts) => collector.record(metricKey, storeKey, counts.within, counts.over),
    storeLatency: (ms) => collector.recordStoreLatency(ms),
    close: stop,
  }
}

/**
 * Mounts the dashboard at /dashboard on the app, behind the admin token. uPlot is this package's
 * dependency: its files are resolved here and handed to the library's handler.
 */
export function registerDashboardRoutes(app: FastifyInstance, collector: DashboardCollector, token: string): void {
  const require = createRequire(import.meta.url)
  const handler: DashboardHandler = dashboardHandler({
    collector,
    token,
    path: '/dashboard',
    title: 'Floodgate service',
    chartLibrary: { script: require.resolve('uplot/dist/uPlot.iife.min.js'), style: require.resolve('uplot/dist/uPlot.min.css') },
  })
  const serve = (request: { raw: Parameters<DashboardHandler>[0] }, reply: { hijack(): void; raw: Parameters<DashboardHandler>[1] }) => {
    // The handler writes the node:http response itself; Fastify must not answer it too.
    reply.hijack()
    handler(request.raw, reply.raw)
  }
  app.get('/dashboard', serve)
  app.get('/dashboard/*', serve)
}
