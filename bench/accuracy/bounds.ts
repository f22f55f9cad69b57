// Modes whose documented bound is not "never over the limit", measured against that bound.

import { measureRegionsShared } from './regions-bound.js'
import type { RunSize } from './setup.js'
import { measureWriteBack } from './write-back-bound.js'
import { measureWriteBackUnder } from './write-back-under.js'

/** One measured setup: what was admitted in one window of a limit, and the bound evaluated for it. */
export interface BoundRow {
  readonly setup: string
  readonly limit: number
  readonly admitted: number
  /** admitted − limit (for an under-admission check: limit − admitted, the shortfall). */
  readonly over: number
  /** The documented bound on `over`, with this setup's terms. */
  readonly bound: number
}

/**
 * Over-admission of modes whose documented bound is not "never over the limit": write-back sync
 * (the units in flight: `N·c + r·(flushMs + 2·RTT)`; and its under-admission when instances use a
 * key one after another, from the share rule) and regions in `shared` mode (what the other
 * regions admitted before their usage was heard: `(R − 1)·ρ·λ`). Each entry runs its mode and
 * states the formula; the report tables measured over-admission against the bound.
 */
export interface BoundCheck {
  readonly mode: string
  /** The documented bound, as a formula a reader can check, and where it is derived. */
  readonly bound: string
  /** 'under': the rows measure the shortfall below the limit against the most it may be. */
  readonly direction?: 'under'
  /** How the run sets the formula's terms. */
  readonly how: string
  readonly measure: (size: RunSize) => Promise<BoundRow[]>
}

export const BOUND_CHECKS: readonly BoundCheck[] = [
  {
    mode: 'write-back',
    bound: '`N·c + r·(flushMs + 2·RTT)` ([sync.md](sync.md#write-back-sync-write-back))',
    how:
      'N instances (RateLimiter, `sync: write-back`, fixed window, `instances: N`) on one memory store reached through ' +
      'a simulated link of round trip RTT, on a simulated clock; demand r units/ms spread over the instances, cost c = 1, ' +
      'for 1.5 × limit / r plus five flush intervals (all in one window).',
    measure: measureWriteBack,
  },
  {
    mode: 'write-back under-admission',
    direction: 'under',
    bound: '`L − Σ_p min(d, R_p·(1 − (1 − 1/N)^m))` ([sync.md](sync.md#under-admission-the-floor))',
    how:
      'N instances as above, one after another: each asks for d units in batches (one burst, or spread over part of ' +
      'an interval or two), then closes, and the next starts once its units are in the store; R_p is what the ' +
      'instances before it left, m the answers an instance is sure to get while its demand lasts. The table gives ' +
      'the shortfall (limit − admitted) against the most the formula allows.',
    measure: measureWriteBackUnder,
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
