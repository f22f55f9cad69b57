// Split mode: each region's allotment of one global limit, and how much a region hands to needy peers.
//
// A region's allotment in a window is its base share plus what peers handed it (as it has heard)
// minus what it handed away. A region hands units away only by charging them to its own state
// first, in the same atomic step as any decision (so only units it has not admitted can go), and a
// receiver raises its limit only after hearing of the grant. Hence, at every moment,
//   Σ_r admitted_r ≤ Σ_r (base_r + heard_r − handed_r) ≤ Σ_r base_r + Σ handed − Σ handed = limit,
// whatever the delays, duplicates or partitions between regions (test/regions/allotments.test.ts
// checks it against a model with arbitrary message delivery).
//
// Which units move follows Doorman's proportional-share idea: capacity goes where the demand is
// now. A region asks its peers for what its recent demand wants beyond what it holds
// (demand.ts), and a region gives from what it holds beyond its own recent demand to the peers
// that asked, in proportion to what each still wants (hand-over.ts).

import { demandOf, grantedBy, grantedTo, usedBy, type UsageFields } from './crdt.js'

/**
 * Each region's base share of `limit`: an equal split, the remainder to the first regions in
 * `regions` order (which every region must list alike, sorted), so the shares sum to `limit` exactly.
 */
export function baseShare(limit: number, regions: readonly string[], region: string): number {
  const index = regions.indexOf(region)
  if (index < 0) return 0
  const even = Math.floor(limit / regions.length)
  return even + (index < limit - even * regions.length ? 1 : 0)
}

/** The limit `region` enforces on its own state in a window: its base share plus what it has heard was handed to it. */
export function enforcedLimit(limit: number, regions: readonly string[], region: string, fields: UsageFields): number {
  return baseShare(limit, regions, region) + grantedTo(fields, region)
}

/** A region's allotment as this copy sees it: base + received − handed away. */
export function allotment(limit: number, regions: readonly string[], region: string, fields: UsageFields): number {
  return enforcedLimit(limit, regions, region, fields) - grantedBy(fields, region)
}

/** A peer's ask as this region holds it: units it wants from this region, and what it had heard this region gave it when it asked. */
export interface HandOverAsk {
  need: number
  known: number
}

/** What a peer still wants from this region: its ask, less what was given to it since it asked. */
export function outstanding(ask: HandOverAsk, givenSince: number): number {
  return Math.max(0, ask.need - Math.max(0, givenSince - ask.known))
}

/**
 * Units to hand to each asking peer (only positive amounts): `spare` (what this region holds
 * beyond its own recent demand) shared in proportion to what each peer still wants, never more
 * than it wants, and never more than `spare` in all.
 */
export function planGives(spare: number, wants: ReadonlyMap<string, number>): Map<string, number> {
  const gives = new Map<string, number>()
  const budgetCap = Math.floor(spare)
  if (budgetCap <= 0) return gives
  let total = 0
  for (const want of wants.values()) if (want > 0) total += Math.floor(want)
  if (total === 0) return gives
  const budget = Math.min(budgetCap, total)
  let left = budget
  const order = [...wants].filter(([, want]) => want >= 1).sort((a, b) => b[1] - a[1])
  for (const [peer, want] of order) {
    const amount = Math.floor((budget * Math.floor(want)) / total)
    if (amount > 0) gives.set(peer, amount)
    left -= amount
  }
  // What the rounding down left goes one unit at a time to the largest wants, so a small budget still moves.
  for (const [peer, want] of order) {
    if (left <= 0) break
    const amount = gives.get(peer) ?? 0
    if (amount < Math.floor(want)) {
      gives.set(peer, amount + 1)
      left--
    }
  }
  return gives
}

/**
 * How many more units `region` asked for in the whole window than its allotment allows (0 when it
 * has enough): what an ask from a region of an older version stands for, which carries no need.
 */
export function shortfall(limit: number, regions: readonly string[], region: string, fields: UsageFields): number {
  const demand = demandOf(fields, region)
  const held = allotment(limit, regions, region, fields)
  // Demand is never below what was admitted; a region that admitted all it asked for is not short.
  return Math.max(0, demand - Math.max(held, usedBy(fields, region)))
}
