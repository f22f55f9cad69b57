// How far a write-back copy may lag the store: how old a copy may be before a decision waits for a
// read, and how many units an instance may admit before the store's answer for a key arrives.

import type { Policy } from '../../core/policy.js'

/**
 * How old a key's copy may be (ms) before its next decision waits for a read: 20 flush intervals, at
 * least a second. A younger copy decides at once; a key used less often than every flush interval
 * then decides from a copy up to that old (docs/sync.md, the bound).
 */
export function staleReadMs(flushMs: number): number {
  return Math.max(1_000, 20 * flushMs)
}

/**
 * How many units an instance may admit for a key before the store's answer for it arrives (a key not
 * held, or held with a copy older than staleReadMs): its share of what the tightest policy refills
 * in one flush interval, `floor(limit / period × flushMs / instances)`. A key that refills less than
 * that gets 0: its first decision waits for the read.
 */
export function provisionalUnits(policies: readonly Policy[], flushMs: number, instances: number): number {
  let units = Infinity
  for (const policy of policies) units = Math.min(units, Math.floor(((policy.limit / policy.periodMs) * flushMs) / instances))
  return units
}

/**
 * How many times a key may ask the store for its next share between two flush ticks when its share
 * ran out and no other instance used it since the last answer (docs/sync.md, under-admission). Each
 * such refresh hands this instance 1/N of what is left, so a few per interval take a lone instance
 * from 1/N of the limit to most of it within two intervals; the cap keeps a key alone at saturation
 * to a few store calls per interval.
 */
export const EARLY_REFRESHES = 4
