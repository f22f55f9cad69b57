// The lease engines of one limiter: one LeaseSync (which holds the leases) and the AutoSync over it.

import type { LeaseStore, Store } from '../../stores/store.js'
import { FloodgateError } from '../../core/errors.js'
import type { Timers } from '../timeout.js'
import { AutoSync } from './auto-sync.js'
import { LeaseSync } from './lease-sync.js'

/** Both engines, sharing one set of held leases (an `auto` key on leases holds them in `leases`). */
export interface LeaseEngines {
  readonly leases: LeaseSync
  readonly auto: AutoSync
}

/**
 * Makes the engines for `store`, its sweep started: lease expiry, demand and heat on `timers.now`
 * (the limiter's, monotonic), concurrency releases stamped on `epochClock` (its `clock`), every
 * lease given back within `timeoutMs` on `timers` (its timeout), at most `maxKeys` keys followed
 * (the limiter's `sync.maxKeys`). A store without the lease primitive (a custom Store) cannot serve
 * `sync: 'lease'` or `'auto'`: refused with a reason rather than decided inexactly.
 */
export function createLeaseEngines(
  store: Store,
  epochClock: () => number,
  timers: Timers,
  timeoutMs: number,
  maxKeys?: number,
): LeaseEngines {
  if (typeof (store as Partial<LeaseStore>).lease !== 'function') {
    throw new FloodgateError(
      'INVALID_OPTION',
      "sync: the store has no lease primitive (Store.lease), which sync: 'lease' and 'auto' need; " +
        "use MemoryStore or RedisStore, or sync: 'always'",
    )
  }
  const leaseStore = store as LeaseStore
  const clock = () => timers.now()
  const giveBackTimeout = { ms: timeoutMs, setTimeout: (callback: () => void, ms: number) => timers.setTimeout(callback, ms) }
  const leases = new LeaseSync({ store: leaseStore, epochClock, clock, maxKeys, giveBackTimeout })
  leases.start()
  return { leases, auto: new AutoSync({ store: leaseStore, leases, clock, maxKeys }) }
}
