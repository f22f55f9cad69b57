// What the sync modes hold right now (write-back's unflushed units, the leases held): read-only, for
// the dashboard and the service's metrics (docs/dashboard.md describes every field).

import type { LeaseEngines } from './sync/lease-engines.js'
import type { WriteBack } from './sync/write-back.js'

/** `sync: 'write-back'` policies: the local copies and what they have not sent yet. */
export interface WriteBackState {
  /** Keys held as local copies. */
  keys: number
  /** Units admitted here that the store has not confirmed yet (0 right after `limiter.flush()` succeeds). */
  unflushed: number
  /** Store calls sent (flushes and first reads) since start. */
  calls: number
  /** Of them, those that failed or timed out (their units were kept for the next flush). */
  failedCalls: number
  /** Units the store recognised as already taken (a resend after a lost answer): counted once. */
  replays: number
  /** New keys refused because every held key had units to send (decided by `onStoreError`). */
  refused: number
}

/** `sync: 'lease'` and `'auto'` policies: the leases this instance holds. */
export interface LeaseState {
  /** Keys followed (holding a lease, waiting for one, or used lately). */
  keys: number
  /** Live leases held now. */
  leases: number
  /** Units left in them: admitted in-process before the next store call. */
  units: number
  /** Leases taken from the store, and ended with their unused units sent back, since start. */
  acquired: number
  returned: number
  /** `auto` keys whose rate is followed, and of them those on leases now (above `hotRate`). */
  autoKeys: number
  autoOnLeases: number
}

/** What `RateLimiter.syncState()` answers: one part per engine, null while no policy set of its mode is in use. */
export interface SyncState {
  writeBack: WriteBackState | null
  leases: LeaseState | null
}

/** Reads the engines' counters (the lease figures walk the keys followed: bounded by their key caps). */
export function readSyncState(writeBack: WriteBack | undefined, engines: LeaseEngines | undefined): SyncState {
  return {
    writeBack:
      writeBack === undefined
        ? null
        : {
            keys: writeBack.size,
            unflushed: writeBack.unsynced,
            calls: writeBack.stats.calls,
            failedCalls: writeBack.stats.failed,
            replays: writeBack.stats.replays,
            refused: writeBack.stats.refused,
          },
    leases: engines === undefined ? null : leaseState(engines),
  }
}

function leaseState({ leases, auto }: LeaseEngines): LeaseState {
  const held = leases.heldTotals()
  const heat = auto.heatTotals()
  return {
    keys: leases.size,
    leases: held.leases,
    units: held.units,
    acquired: leases.stats.acquired,
    returned: leases.stats.returned,
    autoKeys: heat.keys,
    autoOnLeases: heat.hot,
  }
}
