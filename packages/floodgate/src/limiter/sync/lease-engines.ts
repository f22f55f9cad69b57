// The lease engines of one limiter: one LeaseSync (which holds the leases) and the AutoSync over it.

import type { LeaseStore, Store } from '../../stores/store.js'
import { FloodgateError } from '../../core/errors.js'
import { AutoSync } from './auto-sync.js'
import { LeaseSync } from './lease-sync.js'

/** Both engines, sharing one set of held leases (an `auto` key on leases holds them in `leases`). */
export interface LeaseEngines {
  readonly leases: LeaseSync
  readonly auto: AutoSync
}

/**
 * Makes the engines for `store`, its sweep started: lease expiry, demand and heat on `clock` (the
 * limiter's `timers.now`, monotonic), concurrency releases stamped on `epochClock` (its `clock`),
 * at most `maxKeys` keys followed (the limiter's `sync.maxKeys`). A store without the lease primitive (a custom
 * Store) cannot serve `sync: 'lease'` or `'auto'`: refused with a reason rather than decided inexactly.
 */
export function createLeaseEngines(store: Store, epochClock: () => number, clock: () => number, maxKeys?: number): LeaseEngines {
  if (typeof (store as Partial<LeaseStore>).lease !== 'function') {
    throw new FloodgateError(
      'INVALID_OPTION',
      "sync: the store has no lease primitive (Store.lease), which sync: 'lease' and 'auto' need; " +
        "use MemoryStore or RedisStore, or sync: 'always'",
    )
  }
  const leaseStore = store as LeaseStore
  const leases = new LeaseSync({ store: leaseStore, epochClock, clock, maxKeys })
  leases.start()
  return { leases, auto: new AutoSync({ store: leaseStore, leases, clock, maxKeys }) }
}
