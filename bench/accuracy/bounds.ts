// Modes whose documented bound is not "never over the limit", measured against that bound.

import { measureRegionsShared } from './regions-bound.js'
import type { RunSize } from './setup.js'
import { measureWriteBack } from './write-back-bound.js'

/** One measured setup: what was admitted in one window of a limit, and the bound evaluated for it. */
export interface BoundRow {
  readonly setup: string
  readonly limit: number
  readonly admitted: number
  /** admitted − limit. */
  readonly over: number
  /** The documented bound on `over`, with this setup's terms. */
  readonly bound: number
}

/**
 * Over-admission of modes whose documented bound is not "never over the limit": write-back sync
 * (the units in flight: `N·c + r·(flushMs + 2·RTT)`) and regions in `shared` mode (what the other
 * regions admitted before their usage was heard: `(R − 1)·ρ·λ`). Each entry runs its mode and
 * states the formula; the report tables measured over-admission against the bound.
 */
export interface BoundCheck {
  readonly mode: string
  /** The documented bound, as a formula a reader can check, and where it is derived. */
  readonly bound: string
  /** How the run sets the formula's terms. */
  readonly how: string
  readonly measure: (size: RunSize) => Promise<BoundRow[]>
}

export const BOUND_CHECKS: readonly BoundCheck[] = [
  {
    mode: 'write-back',
    bound: '`N·c + r·(flushMs + 2·RTT)` ([sync.md](sync.md#write-back-syncwrite-back))',
    how:
      'N instances (RateLimiter, `sync: write-back`, fixed window, `instances: N`) on one memory store reached through ' +
      'a simulated link of round trip RTT, on a simulated clock; demand r units/ms spread over the instances, cost c = 1, ' +
      'for 1.5 × limit / r plus five flush intervals (all in one window).',
    measure: measureWriteBack,
  },
  {
    mode: 'regions `shared`',
    bound: '`(R − 1)·ρ·λ` ([regions.md](regions.md#shared-the-bound))',
    how:
      'R regions, each a redis-server started on a free port with its RegionSync ticked by hand; every round each region ' +
      'decides ρ requests at once, then every region ticks once, so λ = 2 rounds (a unit admitted in round n is in the ' +
      "other regions' copies for round n + 2); until a whole round admits nothing.",
    measure: measureRegionsShared,
  },
]
