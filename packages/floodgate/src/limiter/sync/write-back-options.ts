// Write-back's options, what it reports, and the validation of its numbers (write-back.ts uses them).

import { FloodgateError } from '../../core/errors.js'
import type { EvaluateResponse, Store } from '../../stores/store.js'

/**
 * The timer write-back uses for its flush ticks and its store-call timeouts (the limiter's `timers`
 * fit); tests inject their own. A timer is never cancelled: one that is no longer wanted does nothing.
 */
export interface WriteBackTimers {
  setTimeout(callback: () => void, ms: number): { unref?(): unknown }
}

export interface WriteBackOptions {
  /** Where the shared state lives; it must implement `merge` (MemoryStore and RedisStore do). */
  store: Store
  /**
   * How many instances share the store's keys (default 1). Each admits at most its share of what the
   * store's last answer shows remaining before it syncs again (docs/sync.md: the share rule), which
   * keeps a burst across N instances near the limit instead of N times it.
   */
  instances?: number
  /**
   * Most keys held (default 100 000). Past it a new key takes the place of the oldest one whose units
   * are all in the store; when every held key still has units to send (a long outage over many keys),
   * a new key is refused with WRITE_BACK_FULL and the limiter decides it by its `onStoreError` mode.
   */
  maxKeys?: number
  /** Longest wait for the store per call, a key's first read or a flush (default 100 ms); then decide locally. */
  timeoutMs?: number
  /** Milliseconds since the epoch (default `Date.now`). Store answers correct it to the store's clock. */
  clock?: () => number
  timers?: WriteBackTimers
  /** Names this instance in idempotent merges (default: random). Two live instances must not share one. */
  origin?: string
}

/** What write-back has done since it started, for metrics and tests. */
export interface WriteBackStats {
  /** Store calls sent (flushes and reads). */
  calls: number
  /** Of them, those that failed or timed out (their units were kept and sent again). */
  failed: number
  /** Requests the store answered as replays: units it had taken before, from a send whose answer was lost. */
  replays: number
  /** New keys refused because every held key had units to send (WRITE_BACK_FULL). */
  refused: number
  /**
   * The oldest store answer an admission was decided from, in ms since it came (0: none yet). The
   * over-admission bound in terms of the configuration holds while this stays within about a flush
   * interval (docs/sync.md); past it, the fleet was slow and the general bound applies.
   */
  oldestAnswerMs: number
}

/** What one local decision answers: the store's shape, with the path that decided it. */
export interface WriteBackResponse extends EvaluateResponse {
  source: 'write-back'
}

export const DEFAULT_TIMERS: WriteBackTimers = { setTimeout: (callback, ms) => setTimeout(callback, ms) }

/** `value` as a whole number of at least `min`, or INVALID_OPTION naming the option. */
export function wholeAtLeast(value: unknown, min: number, field: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min) {
    throw new FloodgateError('INVALID_OPTION', `write-back ${field}: must be a whole number ≥ ${min}, got ${JSON.stringify(value)}`)
  }
  return value
}
