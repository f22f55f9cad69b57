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
// Which units move follows Doorman's proportional-share idea: capacity goes where the demand is.
// A region gives from what it has left beyond its own expected need (its recent demand rate times
// the time left in the window) to peers whose demand exceeds their allotment, in proportion to
// their shortfall.

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

/** What a region knows when it considers handing units away. */
export interface GiveInput {
  limit: number
  regions: readonly string[]
  self: string
  fields: UsageFields
  /** Units this region can still admit in the window (its enforced limit minus its charged state). */
  free: number
  /** Units this region expects to need for the rest of the window (recent demand rate × time left). */
  reserve: number
}

/**
 * Units to hand to each needy peer (only positive amounts). A peer is needy when its demand
 * exceeds its allotment; a region that is itself short gives nothing. The total never exceeds
 * `free - reserve`, and a peer never gets more than its shortfall.
 */
export function planGives(input: GiveInput): Map<string, number> {
  const { limit, regions, self, fields } = input
  const gives = new Map<string, number>()
  if (shortfall(limit, regions, self, fields) > 0) return gives
  const spare = Math.floor(input.free - input.reserve)
  if (spare <= 0) return gives
  const needs: [string, number][] = []
  let totalNeed = 0
  for (const peer of regions) {
    if (peer === self) continue
    const need = shortfall(limit, regions, peer, fields)
    if (need > 0) {
      needs.push([peer, need])
      totalNeed += need
    }
  }
  if (totalNeed === 0) return gives
  const budget = Math.min(spare, totalNeed)
  for (const [peer, need] of needs) {
    const amount = Math.floor((budget * need) / totalNeed)
    if (amount > 0) gives.set(peer, amount)
  }
  return gives
}

/** How many more units `region` asked for than its allotment allows (0 when it has enough). */
export function shortfall(limit: number, regions: readonly string[], region: string, fields: UsageFields): number {
  const demand = demandOf(fields, region)
  const held = allotment(limit, regions, region, fields)
  // Demand is never below what was admitted; a region that admitted all it asked for is not short.
  return Math.max(0, demand - Math.max(held, usedBy(fields, region)))
}
