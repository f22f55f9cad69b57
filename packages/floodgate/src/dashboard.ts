// floodgate/dashboard: a live dashboard for an app that embeds the limiter — a collector fed by the
// limiter's events and a node:http handler (Express, Fastify) serving the page and its JSON.

export {
  DashboardCollector,
  OTHER_RULE,
  type ConfigState,
  type DashboardCollectorOptions,
  type WatchOptions,
} from './dashboard/collector.js'
export { dashboardHandler, type DashboardHandler, type DashboardHandlerOptions } from './dashboard/handler.js'
export { RecentTopKeys, hashKey, MAX_KEPT_KEY_LENGTH, type RecentKey, type RecentTopKeysOptions } from './dashboard/recent-top-keys.js'
export { SpaceSaving, type HeavyHitter } from './dashboard/space-saving.js'
export type { DashboardSnapshot, RegionsSnapshot, RuleSnapshot, SyncSnapshot } from './dashboard/snapshot.js'
export type { LeaseState, SyncState, WriteBackState } from './limiter/sync-state.js'
