// Modes whose documented bound is not "never over the limit", measured against that bound.

/**
 * Over-admission of modes whose documented bound is not "never over the limit": write-back sync
 * (at most the deltas of one flush interval per instance) and regions in `shared` mode (at most
 * what other regions admitted before their usage was heard). Each entry replays its mode and
 * states its bound's formula; the report tables measured over-admission against the bound.
 */
export interface BoundCheck {
  readonly mode: string
  /** The documented bound, as a formula a reader can check. */
  readonly bound: string
  /** Replays the mode; the most admitted in any rolling window, and the bound evaluated for the same setup. */
  readonly measure: () => { worstWindow: number; boundValue: number }
}

export const BOUND_CHECKS: readonly BoundCheck[] = []
