// The lease manager's options, how it answers, and what it reports (lease-sync.ts).

import type { EvaluateResponse, LeaseStore } from '../../stores/store.js'

/** Which path decided: `lease` (in-process, from a held lease) or `store` (a store call decided it). */
export type LeaseSource = 'lease' | 'store'

/** How a decision is answered: `(null, response, source)` or `(error)` when the store failed. */
export type LeaseCallback = (error: unknown, response?: EvaluateResponse, source?: LeaseSource) => void

/** The timer functions the sweep uses (injected by tests). */
export interface SweepTimers {
  setInterval(callback: () => void, ms: number): unknown
  clearInterval(handle: unknown): void
}

export interface LeaseSyncOptions {
  store: LeaseStore
  /**
   * Milliseconds on a clock that only moves forward at the pace of real time (default
   * `performance.now`): lease expiry, idleness and demand are measured on it. Tests inject one.
   */
  clock?: () => number
  /** Milliseconds since the epoch (default `Date.now`): the limiter's clock, which stamps concurrency leases. */
  epochClock?: () => number
  /** How often leases of quiet keys, and leases about to expire, go back (default 100 ms). */
  sweepMs?: number
  /** The timers the sweep runs on (default the global ones). */
  timers?: SweepTimers
  /** Most keys followed at once (default 10 000): past it the quietest key's lease goes back. */
  maxKeys?: number
  /**
   * Longest wait (ms) for the store's answers when every lease goes back (`giveBackAll`, `close`),
   * with the timer that ends it (the limiter's timeout and timers); default no bound. A paused
   * store then cannot hold up a shutdown: a return it applies later is applied once, and one it
   * never applies comes back by itself when its lease expires.
   */
  giveBackTimeout?: { ms: number; setTimeout(callback: () => void, ms: number): { unref?(): unknown } }
}

/** What the leases have done since start, for metrics and the dashboard. */
export interface LeaseStats {
  /** Leases taken from the store. */
  acquired: number
  /** Leases ended by this instance, their unused units sent back (on renewal, sweep, drop or close). */
  returned: number
}
