// Prometheus metrics of the links to peer regions: replication lag, time since heard, usage exchanged.

import { Counter, Gauge, type Registry } from 'prom-client'
import type { RegionSyncStatus } from 'floodgate/redis'

/**
 * Registers the region metrics on `registry`, read from `status()` at each scrape:
 * - `floodgate_region_replication_lag_seconds{peer}`: how old the freshest usage held from the peer is;
 * - `floodgate_region_peer_last_heard_seconds{peer}`: time since the last exchange with the peer succeeded;
 * - `floodgate_region_peer_up{peer}`: 1 when the last exchange succeeded, else 0;
 * - `floodgate_region_deltas_sent_total{peer}` / `…_received_total{peer}`: usage hashes sent to the
 *   peer, and received from it with news;
 * - `floodgate_region_exchange_failures_total{peer}`, `floodgate_region_units_given_total`,
 *   `floodgate_region_units_claimed_total`, `floodgate_region_counts_lost_total`.
 * Peers are the configured regions, so the label set is bounded.
 */
export function registerRegionMetrics(registry: Registry, status: () => RegionSyncStatus | undefined): void {
  const registers = [registry]
  const peerGauge = (name: string, help: string, read: (peer: RegionSyncStatus['peers'][number], now: number) => number | undefined) =>
    new Gauge({
      name,
      help,
      labelNames: ['peer'],
      registers,
      collect() {
        this.reset()
        const now = Date.now()
        for (const peer of status()?.peers ?? []) {
          const value = read(peer, now)
          if (value !== undefined) this.set({ peer: peer.name }, value)
        }
      },
    })
  peerGauge('floodgate_region_replication_lag_seconds', 'Age of the freshest usage held from each peer region (seconds).', (peer) =>
    peer.lagMs === undefined ? undefined : peer.lagMs / 1000,
  )
  peerGauge(
    'floodgate_region_peer_last_heard_seconds',
    'Time since the last successful exchange with each peer region (s).',
    (peer, now) => (peer.lastHeardAt === undefined ? undefined : Math.max(0, now - peer.lastHeardAt) / 1000),
  )
  peerGauge('floodgate_region_peer_up', 'Whether the last exchange with each peer region succeeded (1) or not (0).', (peer) =>
    peer.connected ? 1 : 0,
  )

  // Counters from totals the sync keeps: each scrape adds what grew since the last one.
  const seen = new Map<string, number>()
  const peerCounter = (name: string, help: string, read: (peer: RegionSyncStatus['peers'][number]) => number) =>
    new Counter({
      name,
      help,
      labelNames: ['peer'],
      registers,
      collect() {
        for (const peer of status()?.peers ?? []) grow(this, `${name}\u0000${peer.name}`, read(peer), { peer: peer.name })
      },
    })
  peerCounter('floodgate_region_deltas_sent_total', 'Usage hashes sent to each peer region.', (peer) => peer.sent)
  peerCounter('floodgate_region_deltas_received_total', 'Usage hashes received from each peer region with news.', (p) => p.received)
  peerCounter('floodgate_region_exchange_failures_total', 'Exchanges with each peer region that failed or timed out.', (p) => p.failures)
  const counter = (name: string, help: string, read: (counters: RegionSyncStatus['counters']) => number) =>
    new Counter({
      name,
      help,
      registers,
      collect() {
        const current = status()
        if (current !== undefined) grow(this, name, read(current.counters))
      },
    })
  counter('floodgate_region_units_given_total', 'Units of split limits handed to peer regions.', (c) => c.unitsGiven)
  counter('floodgate_region_units_claimed_total', "Units of peer regions' use charged into this region's buckets.", (c) => c.unitsClaimed)
  counter('floodgate_region_counts_lost_total', 'Decisions whose usage the sync could not keep (memory bound).', (c) => c.lost)

  function grow(target: Counter<string>, id: string, total: number, labels?: Record<string, string>): void {
    const delta = total - (seen.get(id) ?? 0)
    seen.set(id, total)
    if (delta <= 0) return
    if (labels === undefined) target.inc(delta)
    else target.inc(labels, delta)
  }
}
