// Prometheus metrics of the sync modes: write-back's unflushed units and store calls, the leases held.

import { Counter, Gauge, type Registry } from 'prom-client'
import type { SyncState } from 'floodgate'

/**
 * Registers the sync metrics on `registry`, read from the limiter's `syncState()` at each scrape
 * (0 while no rule uses the mode):
 * - `floodgate_write_back_keys`, `floodgate_write_back_unflushed_units`: keys held as local copies,
 *   and units admitted here that the store has not confirmed yet;
 * - `floodgate_write_back_store_calls_total`, `…_failed_calls_total`, `…_replays_total`,
 *   `…_refused_keys_total`: flushes and reads sent, those that failed, units the store had already
 *   taken (a resend after a lost answer), and new keys refused while every held key had units to send;
 * - `floodgate_lease_keys`, `floodgate_leases_held`, `floodgate_lease_units_held`: keys followed,
 *   live leases and the units left in them;
 * - `floodgate_leases_acquired_total`, `floodgate_leases_returned_total`;
 * - `floodgate_auto_keys`, `floodgate_auto_keys_on_leases`: `auto` keys followed, and those on leases now.
 */
export function registerSyncMetrics(registry: Registry, state: () => SyncState): void {
  const registers = [registry]
  // Read per metric: the lease figures walk the keys followed (at most their cap, 10 000 each), a
  // few milliseconds per scrape at worst.
  const read = state
  const gauge = (name: string, help: string, value: (state: SyncState) => number | undefined) =>
    new Gauge({
      name,
      help,
      registers,
      collect() {
        this.set(value(read()) ?? 0)
      },
    })
  // Counters from totals the engines keep: each scrape adds what grew since the last one.
  const seen = new Map<string, number>()
  const counter = (name: string, help: string, value: (state: SyncState) => number | undefined) =>
    new Counter({
      name,
      help,
      registers,
      collect() {
        const total = value(read()) ?? 0
        const delta = total - (seen.get(name) ?? 0)
        seen.set(name, total)
        if (delta > 0) this.inc(delta)
      },
    })
  gauge('floodgate_write_back_keys', 'Keys write-back holds as local copies.', (s) => s.writeBack?.keys)
  gauge('floodgate_write_back_unflushed_units', 'Units admitted here that the store has not confirmed yet.', (s) => s.writeBack?.unflushed)
  counter('floodgate_write_back_store_calls_total', 'Write-back flushes and reads sent to the store.', (s) => s.writeBack?.calls)
  counter('floodgate_write_back_failed_calls_total', 'Write-back store calls that failed or timed out.', (s) => s.writeBack?.failedCalls)
  counter('floodgate_write_back_replays_total', 'Write-back units the store had already taken (a resend).', (s) => s.writeBack?.replays)
  counter(
    'floodgate_write_back_refused_keys_total',
    'New keys write-back refused, every held key having units to send.',
    (s) => s.writeBack?.refused,
  )
  gauge('floodgate_lease_keys', 'Keys the lease engine follows.', (s) => s.leases?.keys)
  gauge('floodgate_leases_held', 'Live leases held by this instance.', (s) => s.leases?.leases)
  gauge(
    'floodgate_lease_units_held',
    'Units left in the leases held (admitted in-process before the next store call).',
    (s) => s.leases?.units,
  )
  counter('floodgate_leases_acquired_total', 'Leases taken from the store.', (s) => s.leases?.acquired)
  counter('floodgate_leases_returned_total', 'Leases ended with their unused units sent back.', (s) => s.leases?.returned)
  gauge('floodgate_auto_keys', "Keys of sync: 'auto' rules whose rate is followed.", (s) => s.leases?.autoKeys)
  gauge('floodgate_auto_keys_on_leases', "Keys of sync: 'auto' rules on leases now (above hotRate).", (s) => s.leases?.autoOnLeases)
}
