// Prometheus metrics of the service's sockets: connections open per server, and those the server closed, by reason.

import { Counter, Gauge, type Registry } from 'prom-client'

type Server = 'http' | 'grpc'

/** A server's figures: sockets open now, and the totals closed by the server per reason. */
export interface ConnectionStats {
  open: number
  shed: Readonly<Record<string, number>>
}

/**
 * Registers, read at each scrape:
 * - `floodgate_connections{server}`: sockets open on the HTTP and gRPC ports;
 * - `floodgate_connections_closed_total{server,reason}`: those the server closed itself: `cap` (shed at
 *   the connection cap for a newer client, or the newcomer refused), and on gRPC `idle`, `handshake`
 *   (no HTTP/2 preface in time) and `keepalive` (too many pings).
 */
export function registerConnectionMetrics(registry: Registry, stats: Record<Server, () => ConnectionStats>): void {
  const registers = [registry]
  const servers = Object.entries(stats) as [Server, () => ConnectionStats][]
  new Gauge({
    name: 'floodgate_connections',
    help: 'Sockets open on the HTTP and gRPC ports.',
    labelNames: ['server'],
    registers,
    collect() {
      for (const [server, read] of servers) this.set({ server }, read().open)
    },
  })
  // Totals kept by the servers: each scrape adds what grew since the last one.
  const seen = new Map<string, number>()
  new Counter({
    name: 'floodgate_connections_closed_total',
    help: 'Sockets the server closed itself, by reason (cap, idle, handshake, keepalive).',
    labelNames: ['server', 'reason'],
    registers,
    collect() {
      for (const [server, read] of servers) {
        for (const [reason, total] of Object.entries(read().shed)) {
          const key = `${server}/${reason}`
          const delta = total - (seen.get(key) ?? 0)
          seen.set(key, total)
          // Also at 0, so each series is there from the first scrape (a rate() has a start).
          this.inc({ server, reason }, Math.max(0, delta))
        }
      }
    },
  })
}
