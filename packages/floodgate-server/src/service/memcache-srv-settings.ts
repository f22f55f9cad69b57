// Settings of `floodgate serve` for memcached servers found by an SRV record (upstream's MEMCACHE_SRV and
// MEMCACHE_SRV_REFRESH), and the DNS servers asked. Their flags are MEMCACHE_SRV_OPTIONS in memcache-options.ts.

import { isIP } from 'node:net'
import { z } from 'zod'
import { timerMs } from './setting-values.js'

/** Where the memcached servers are looked up, and how often again. */
export interface MemcacheSrvSettings {
  /** The SRV record, `_service._proto.name` (e.g. `_memcache._tcp.example.org`), as upstream takes it. */
  name: string
  /** Look it up again this often and use the answer; 0: only at start (upstream's default). */
  refreshMs: number
  /** DNS servers to ask (`ip` or `ip:port`, `[ipv6]:port`); undefined: the system's resolvers. */
  dnsServers: string[] | undefined
}

/** Upstream's form of an SRV name (src/srv/srv.go): `_service._proto.name`. */
export const SRV_NAME = /^_(.+?)\._(.+?)\.(.+)$/

/** The zod fields of these options, spread into the settings schema. */
export function memcacheSrvFields() {
  return {
    memcacheSrv: z.string().regex(SRV_NAME, 'expected an SRV record name like _memcache._tcp.example.org').optional(),
    // 0 (upstream's default) looks the record up only at start; a duration, that often.
    memcacheSrvRefresh: z
      .string()
      .optional()
      .transform((value) => (value === undefined || /^0+$/.test(value) ? undefined : value))
      .pipe(timerMs(0)),
    dnsServer: z
      .string()
      .optional()
      .transform((list, ctx) => {
        if (list === undefined) return undefined
        const servers = list
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean)
        const bad = servers.find((server) => !isDnsServer(server))
        if (bad !== undefined || servers.length === 0) {
          ctx.addIssue({ code: 'custom', message: `expected ip or ip:port (IPv6 as [addr]:port), got ${JSON.stringify(bad ?? list)}` })
          return z.NEVER
        }
        return servers
      }),
  }
}

interface Parsed {
  memcacheSrv?: string
  memcacheSrvRefresh: number
  dnsServer?: string[]
  memcached?: unknown
}

/** What does not go together, each with its reason (called from the schema's superRefine). */
export function memcacheSrvIssues(o: Partial<Parsed>, issue: (path: string, message: string) => void): void {
  if (o.memcacheSrv === undefined) {
    if (o.memcacheSrvRefresh) issue('memcacheSrvRefresh', 'only applies with --memcache-srv (MEMCACHE_SRV)')
    if (o.dnsServer) issue('dnsServer', 'only applies with --memcache-srv (MEMCACHE_SRV): it is where the SRV record is looked up')
    return
  }
  // As upstream, which refuses to start with both MEMCACHE_HOST_PORT and MEMCACHE_SRV.
  if (o.memcached !== undefined)
    issue('memcacheSrv', 'give either --memcached (MEMCACHE_HOST_PORT) or --memcache-srv (MEMCACHE_SRV), not both')
}

/** The parsed fields as settings, when --memcache-srv is given. */
export function memcacheSrvSettings(o: Parsed): MemcacheSrvSettings | undefined {
  if (o.memcacheSrv === undefined) return undefined
  return { name: o.memcacheSrv, refreshMs: o.memcacheSrvRefresh, dnsServers: o.dnsServer }
}

/** `ip`, `ip:port` or `[ipv6]:port`, as node:dns's `setServers` takes them. */
function isDnsServer(server: string): boolean {
  if (isIP(server) !== 0) return true
  const match = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(server)
  if (match === null || Number(match[3]) > 65_535) return false
  return match[1] !== undefined ? isIP(match[1]) === 6 : isIP(match[2]) === 4
}
