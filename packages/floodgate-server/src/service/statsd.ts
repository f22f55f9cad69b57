// envoyproxy/ratelimit's stats over statsd or DogStatsD: its names, its counters (increments summed and
// sent every flush interval, as its gostats store does), EXTRA_TAGS and DogStatsD mogrifiers.
// hot-shots is loaded only when --statsd is given.

import type { Logger } from 'pino'
import type { HitCounts, StatsListener } from './metrics.js'
import { sanitizeStatName } from './metrics.js'
import { mogrify } from './statsd-mogrifiers.js'
import type { StatsdSettings } from './telemetry-settings.js'

/** The part of hot-shots' client this uses. */
interface StatsdClient {
  increment(stat: string, value: number, tags?: string[]): void
  timing(stat: string, value: number, tags?: string[]): void
  close(callback?: (error?: Error) => void): void
}

/** One stat as sent: its name and, for DogStatsD, its tags. */
interface StatName {
  name: string
  tags: string[] | undefined
}

/** Which of upstream's per-key counters reads which count. */
const PER_KEY: readonly [string, keyof HitCounts][] = [
  ['total_hits', 'total'],
  ['over_limit', 'over'],
  ['near_limit', 'near'],
  ['within_limit', 'within'],
  ['shadow_mode', 'shadow'],
  // Floodgate's deny cache is upstream's local cache: a denial answered without the store.
  ['over_limit_with_local_cache', 'denyCache'],
]

/** Longest silence between two logged send errors (a statsd server that is down fails every flush). */
const ERROR_LOG_MS = 60_000

/** The statsd export: a StatsListener for ServiceMetrics, flushing on a timer and on close. */
export class StatsdExport implements StatsListener {
  readonly #client: StatsdClient
  readonly #settings: StatsdSettings
  // Counter increments since the last flush, by the stat's full name (tags serialized in, as gostats keys them).
  readonly #pending = new Map<string, number>()
  readonly #names = new Map<string, StatName>()
  readonly #timer: NodeJS.Timeout
  #closed = false

  private constructor(client: StatsdClient, settings: StatsdSettings) {
    this.#client = client
    this.#settings = settings
    this.#timer = setInterval(() => this.flush(), settings.intervalMs)
    this.#timer.unref()
  }

  /** Loads hot-shots and connects; send errors are logged (at most once a minute), never thrown. */
  static async start(settings: StatsdSettings, logger: Logger): Promise<StatsdExport> {
    const { StatsD } = await import('hot-shots')
    let lastLogged = -Infinity
    const client = new StatsD({
      host: settings.host,
      port: settings.port,
      protocol: settings.protocol,
      // Stats are batched into datagrams of at most this many bytes (under a typical MTU).
      maxBufferSize: 1400,
      tcpGracefulErrorHandling: true,
      errorHandler: (error) => {
        const now = performance.now()
        if (now - lastLogged < ERROR_LOG_MS) return
        lastLogged = now
        logger.warn({ err: error }, `statsd: sending to ${settings.host}:${settings.port} failed`)
      },
    })
    logger.info(`statsd: sending ${settings.format} stats to ${settings.host}:${settings.port} over ${settings.protocol}`)
    return new StatsdExport(client, settings)
  }

  hit(metricKey: string, counts: HitCounts): void {
    const key = sanitizeStatName(metricKey)
    for (const [suffix, field] of PER_KEY) {
      if (counts[field] > 0) this.#add(`ratelimit.service.rate_limit.${key}.${suffix}`, counts[field])
    }
  }

  requestError(kind: 'store' | 'service'): void {
    this.#add(`ratelimit.service.call.should_rate_limit.${kind === 'store' ? 'redis_error' : 'service_error'}`, 1)
  }

  domainNotFound(domain: string, descriptors: number): void {
    this.#add(`ratelimit.service.rate_limit.${sanitizeStatName(domain)}.domain_not_found`, descriptors)
  }

  globalShadow(): void {
    this.#add('ratelimit.service.global_shadow_mode', 1)
  }

  configLoad(result: 'success' | 'error'): void {
    this.#add(`ratelimit.service.config_load_${result}`, 1)
  }

  grpcCall(ms: number): void {
    this.#add('ratelimit_server.ShouldRateLimit.total_requests', 1)
    // Timers are sent as they happen, as gostats sends them (whole milliseconds, as upstream measures).
    if (this.#closed) return
    const stat = this.#nameOf('ratelimit_server.ShouldRateLimit.response_time')
    this.#client.timing(stat.name, Math.floor(ms), stat.tags)
  }

  /** Sends every counter's increments since the last flush; a counter with none sends nothing, as upstream's. */
  flush(): void {
    if (this.#closed) return
    for (const [full, value] of this.#pending) {
      const stat = this.#names.get(full) as StatName
      this.#client.increment(stat.name, value, stat.tags)
    }
    this.#pending.clear()
  }

  /** Sends what is pending and closes the client (its buffer is flushed first). */
  close(): Promise<void> {
    if (this.#closed) return Promise.resolve()
    this.flush()
    this.#closed = true
    clearInterval(this.#timer)
    return new Promise((resolve) => this.#client.close(() => resolve()))
  }

  #add(name: string, value: number): void {
    if (this.#closed) return
    const full = this.#nameOf(name).full
    this.#pending.set(full, (this.#pending.get(full) ?? 0) + value)
  }

  // The stat's name as sent, computed once per name: tags in the name for statsd; for DogStatsD,
  // EXTRA_TAGS as tags, then the first matching mogrifier's rewrite.
  #nameOf(name: string): StatName & { full: string } {
    const full = serializeTags(name, this.#settings.tags)
    let stat = this.#names.get(full)
    if (stat === undefined) {
      if (this.#settings.format === 'statsd') stat = { name: full, tags: undefined }
      else {
        const rewritten = mogrify(this.#settings.mogrifiers, name)
        const tags = sortedTags(this.#settings.tags).map(([key, value]) => `${key}:${value}`)
        stat = { name: rewritten.name, tags: [...tags, ...rewritten.tags] }
      }
      this.#names.set(full, stat)
    }
    return { ...stat, full }
  }
}

/** gostats' order of tags: by key, each value with `.`, `:` and `|` made `_`. */
function sortedTags(tags: StatsdSettings['tags']): [string, string][] {
  return [...tags].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([key, value]) => [key, value.replace(/[.:|]/g, '_')])
}

/** A stat's name with tags serialized in, as gostats names it (`name.__key=value…`) and upstream's statsd sink sends it. */
export function serializeTags(name: string, tags: StatsdSettings['tags']): string {
  let full = name
  for (const [key, value] of sortedTags(tags)) full += `.__${key}=${value}`
  return full
}
