// How a policy's state is kept (`sync`): the modes, their knobs, and which algorithms each mode is sound for.

import type { AlgorithmName, Mode } from './policy.js'
import { mergeRefusal } from './merge.js'

/**
 * How a policy's state is kept between the store and this process.
 * - `always` (default): every decision is made in the store, exactly (batched per event-loop tick).
 * - `lease`: the instance takes a block of units from the store in one atomic call and admits from
 *   it locally; the sum of all leases never exceeds the limit (see docs/sync.md).
 * - `write-back`: decide from a local copy and flush per-key deltas every `flushMs`; over-admission
 *   is bounded (see docs/sync.md).
 * - `auto`: exact (`always`) while a key is cold on this instance, `lease` while it is hot.
 */
export type SyncMode = 'always' | 'lease' | 'write-back' | 'auto'

export const SYNC_MODES: readonly SyncMode[] = ['always', 'lease', 'write-back', 'auto']

/** Defaults of the sync knobs, in milliseconds and units. */
export const SYNC_DEFAULTS = Object.freeze({
  /** write-back: how often deltas are flushed. */
  flushMs: 50,
  /** lease/auto: the longest a lease lives before its unused units go back (also bounded by a fixed window's end). */
  leaseMs: 1000,
  /**
   * auto: decisions one lease time must hold for a key to move to leases; the default `hotRate` is
   * this many per `leaseMs` (12 a second at 1 s). A lease taken and given back costs the Node CPU
   * of about 12 decisions' worth of what an in-process answer saves over an exact one, and the
   * Redis CPU of about 8 exact decisions (docs/sync.md, Auto): a lease covering fewer decisions
   * costs more than the exact calls it replaces.
   */
  hotDecisionsPerLease: 12,
})

/** What `sync` may be combined with; undefined when sound, else the reason it is not. */
export function syncRefusal(sync: SyncMode, algorithm: AlgorithmName, shaping: boolean, mode: Mode, blockMs: number): string | undefined {
  if (sync === 'always') return undefined
  if (sync === 'write-back') return writeBackRefusal(algorithm, shaping, mode)
  return leaseRefusal(algorithm, shaping, mode, blockMs)
}

/**
 * Why `lease` (and `auto`, which leases hot keys) is unsound for a policy, or undefined. A lease
 * is a block of units spent later, locally; the sum of what all instances admit stays within the
 * limit only where a block can be accounted for in the algorithm's state (docs/sync.md proves each).
 */
function leaseRefusal(algorithm: AlgorithmName, shaping: boolean, mode: Mode, blockMs: number): string | undefined {
  if (algorithm === 'sliding-log') {
    return (
      'sliding-log promises ≤ limit in every rolling window by the time of each request; units taken in a block ' +
      'and spent later would be logged at the wrong time. Use sliding-window or token-bucket with lease'
    )
  }
  if (algorithm === 'leaky-bucket') {
    return shaping
      ? 'leaky-bucket shaping gives each request its own place in the queue (delayMs), which only the store can hand out'
      : 'leaky-bucket policing orders requests by their arrival at the store; use token-bucket (the same policing) with lease'
  }
  if (mode === 'elastic') return 'elastic mode asks the shared pool at every admission past the limit, which a local block cannot do'
  if (blockMs > 0) return 'a block period starts at a denial in the store, which a lease decides locally; drop blockMs or use sync: always'
  return undefined
}

/**
 * Why `write-back` is unsound for a policy, or undefined. Write-back merges the units each instance
 * admitted into the stored state, so it needs a merge (core/merge.ts refuses concurrency, sliding-log
 * and leaky-bucket shaping, and says why); elastic mode asks the shared pool at every admission past
 * the limit, which a decision from a local copy cannot. A block period (`blockMs`) is allowed: it
 * starts and runs on the instance that denied (docs/sync.md).
 */
function writeBackRefusal(algorithm: AlgorithmName, shaping: boolean, mode: Mode): string | undefined {
  const refusal = mergeRefusal(algorithm, shaping)
  if (refusal !== undefined) return refusal
  if (mode === 'elastic') return 'elastic mode asks the shared pool at every admission past the limit, which a local copy cannot do'
  return undefined
}
