// memcached servers from an SRV record (upstream's MEMCACHE_SRV): looked up at start, and every MEMCACHE_SRV_REFRESH
// again, the store then moved to the new list (MemcachedStore.setServers); a failed or empty answer keeps the old one.

import { Resolver } from 'node:dns/promises'
import { FloodgateError } from 'floodgate'
import type { MemcachedStore } from 'floodgate/memcached'
import type { Logger } from 'pino'
import { Counter, Gauge, type Registry } from 'prom-client'
import type { MemcacheSrvSettings } from './memcache-srv-settings.js'

/** Longest wait for one DNS answer, and tries per server: a refresh must not hang on a DNS server that is gone. */
const DNS_TIMEOUT_MS = 2_000
const DNS_TRIES = 2

/** A resolver that asks `dnsServers` (the system's resolvers when undefined). */
export function srvResolver(dnsServers: readonly string[] | undefined): Resolver {
  const resolver = new Resolver({ timeout: DNS_TIMEOUT_MS, tries: DNS_TRIES })
  if (dnsServers !== undefined) resolver.setServers(dnsServers)
  return resolver
}

/**
 * The servers the SRV record `name` lists, `target:port` each, in upstream's order (src/srv/srv.go
 * sorts `target.:port`, the target with its final dot, as Go returns it): a server listed twice is
 * kept once. Targets stay names; the memcached client resolves them when it connects, as upstream's does.
 */
export async function lookupServers(resolver: Resolver, name: string): Promise<string[]> {
  const records = await resolver.resolveSrv(name)
  const sorted = [...new Set(records.map((record) => `${record.name.replace(/\.$/, '')}.:${record.port}`))].sort()
  return sorted.map((server) => server.replace('.:', ':'))
}

/** The first lookup, which the service does not start without (upstream panics likewise). */
export async function lookupAtStart(settings: MemcacheSrvSettings, resolver: Resolver): Promise<string[]> {
  let servers: string[]
  try {
    servers = await lookupServers(resolver, settings.name)
  } catch (error) {
    throw new FloodgateError('STORE_UNAVAILABLE', `${where(settings)}: the SRV lookup failed: ${describe(error)}`)
  }
  if (servers.length === 0) throw new FloodgateError('STORE_UNAVAILABLE', `${where(settings)}: the SRV record lists no servers`)
  return servers
}

/** How a refresh went, as the metrics count it. */
type Outcome = 'changed' | 'unchanged' | 'failed' | 'empty'

/**
 * Looks the record up every `refreshMs` and hands a new list to the store. Never two lookups at once:
 * the next is timed from the end of the last. A lookup that fails, or answers no server, or a list
 * the store refuses, keeps the servers in use; each is logged and counted in
 * `floodgate_memcache_srv_refreshes_total{result}`, and `floodgate_memcache_servers` is the list's size.
 */
export class MemcacheSrvRefresh {
  private timer: NodeJS.Timeout | undefined
  private closed = false
  private readonly refreshes: Counter<'result'>

  constructor(
    private readonly store: MemcachedStore,
    private readonly settings: MemcacheSrvSettings,
    private readonly resolver: Resolver,
    private readonly logger: Logger,
    registry: Registry,
    // Told each list the store took, at once: --compat-keys envoy's counter moves to it too (upstream's placement).
    private readonly onServers: (servers: readonly string[]) => void = () => {},
  ) {
    this.refreshes = new Counter({
      name: 'floodgate_memcache_srv_refreshes_total',
      help: 'Lookups of the memcached SRV record after start, by result (changed, unchanged; failed and empty keep the list).',
      labelNames: ['result'],
      registers: [registry],
    })
    new Gauge({
      name: 'floodgate_memcache_servers',
      help: 'memcached servers the store uses now.',
      registers: [registry],
      collect() {
        this.set(store.shards?.().length ?? 0)
      },
    })
    this.schedule()
  }

  /** Stops refreshing; a lookup under way is cancelled. */
  close(): void {
    this.closed = true
    clearTimeout(this.timer)
    this.resolver.cancel()
  }

  private schedule(): void {
    if (this.closed) return
    this.timer = setTimeout(() => {
      void this.refresh().then((outcome) => {
        this.refreshes.inc({ result: outcome })
        this.schedule()
      })
    }, this.settings.refreshMs)
    this.timer.unref()
  }

  private async refresh(): Promise<Outcome> {
    const before = this.store.shards?.() ?? []
    let servers: string[]
    try {
      servers = await lookupServers(this.resolver, this.settings.name)
    } catch (error) {
      if (this.closed) return 'unchanged'
      // node:dns answers a record with no entries with ENODATA: the record is there, and empty.
      if ((error as { code?: unknown }).code !== 'ENODATA') {
        this.logger.warn(`${where(this.settings)}: the SRV lookup failed (${describe(error)}); keeping ${before.join(',')}`)
        return 'failed'
      }
      servers = []
    }
    if (servers.length === 0) {
      this.logger.warn(`${where(this.settings)}: the SRV record lists no servers; keeping ${before.join(',')}`)
      return 'empty'
    }
    if (sameServers(servers, before)) return 'unchanged'
    // The store takes the list at once (its promise tells when the removed servers are closed) or
    // refuses it, changing nothing.
    const swapped = this.store.setServers(servers)
    if (!sameServers(this.store.shards?.() ?? [], servers)) {
      const error = await swapped.then(
        () => undefined,
        (refusal: unknown) => refusal,
      )
      this.logger.warn(`${where(this.settings)}: the SRV record's servers were refused (${describe(error)}); keeping ${before.join(',')}`)
      return 'failed'
    }
    this.onServers(servers)
    this.logger.info({ servers, before }, `${where(this.settings)}: memcached servers now ${servers.join(',')}`)
    return 'changed'
  }
}

function sameServers(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((server) => b.includes(server))
}

function where(settings: MemcacheSrvSettings): string {
  return `MEMCACHE_SRV / --memcache-srv ${settings.name}`
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
