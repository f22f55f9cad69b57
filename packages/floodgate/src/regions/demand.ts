// Split mode's recent demand: what each region was asked for over the last horizon, from the cumulative counts a process sees.
//
// The usage hash holds each region's demand as a grow-only count for the whole window (`d|<region>`),
// which is what a CRDT can merge. Whether a region needs units *now* is a question about the last
// moments, not the window: a region that was short once and then went quiet must give its units
// back. So each process samples the counts of the (key, policy, window) entries it looks at, once a
// tick, and reads recent demand off the samples: the growth over the last `horizonMs`. A region
// then wants, for the next horizon, what it was asked for in the last one; it asks peers for what it
// wants beyond what it holds, and gives what it holds beyond what it wants.

import { allotment, type HandOverAsk } from './allotments.js'
import { demandField, grantField, usedBy, type UsageFields } from './crdt.js'

/** Samples kept per entry: the horizon at one a tick, with room for ticks closer than the interval. */
const MAX_SAMPLES = 24

/**
 * Samples of every region's cumulative demand for one entry, as this process saw them: each is
 * `[at, d(region 0), d(region 1), …]` in the regions' sorted order. Only the newest sample at or
 * before `at - horizonMs` is kept of the older ones: the base the recent growth is measured from.
 */
export class DemandMeter {
  private readonly samples: number[][] = []

  constructor(
    private readonly regions: readonly string[],
    private readonly horizonMs: number,
  ) {}

  /** Records the counts of `fields` at `at` (a sample no later than the newest replaces it, but never the first). */
  observe(at: number, fields: UsageFields): void {
    const sample = [at]
    for (const region of this.regions) sample.push(fields.get(demandField(region)) ?? 0)
    const samples = this.samples
    // The first sample stays: it is the base until a later one is a horizon old.
    if (samples.length > 1 && samples[samples.length - 1][0] >= at) samples[samples.length - 1] = sample
    else samples.push(sample)
    while (samples.length > MAX_SAMPLES || (samples.length > 2 && samples[1][0] <= at - this.horizonMs)) samples.shift()
  }

  /**
   * Units `region` was asked for over the last horizon (as this process heard of them), or
   * undefined before two samples. A base older than the horizon (an entry not looked at for a
   * while) scales the growth down to one horizon's worth: an average, never an extrapolation of a
   * short span, so one request just before a tick never reads as a flood.
   */
  recent(region: string): number | undefined {
    const samples = this.samples
    if (samples.length < 2) return undefined
    const index = this.regions.indexOf(region) + 1
    if (index === 0) return 0
    const base = samples[0]
    const last = samples[samples.length - 1]
    const grown = last[index] - base[index]
    const span = last[0] - base[0]
    return span > this.horizonMs ? (grown * this.horizonMs) / span : grown
  }

  /** How much `region`'s demand grew between the last two samples (0 before two). */
  lastGrowth(region: string): number {
    const samples = this.samples
    const index = this.regions.indexOf(region) + 1
    if (samples.length < 2 || index === 0) return 0
    return samples[samples.length - 1][index] - samples[samples.length - 2][index]
  }
}

/** Units `region` can still admit as a copy sees it: its allotment less what it admitted. */
export function freeOf(limit: number, regions: readonly string[], region: string, fields: UsageFields): number {
  return Math.max(0, allotment(limit, regions, region, fields) - usedBy(fields, region))
}

/**
 * What this region (`self`) asks each peer for: nothing unless it was asked for units since the
 * last sample and wants more for the next horizon than it holds. The need is spread over the peers by what they seem to hold beyond
 * their own recent demand (else by what they hold, else evenly), so that regions together are
 * asked for about the need once, not once each. `known` is what this copy has heard each peer
 * gave it: a peer counts what it gave since as already answered.
 */
export function asksOf(
  limit: number,
  regions: readonly string[],
  self: string,
  fields: UsageFields,
  meter: DemandMeter,
): Map<string, HandOverAsk> {
  const asks = new Map<string, HandOverAsk>()
  // A region whose clients left wants nothing more, whatever its recent past says.
  if (meter.lastGrowth(self) <= 0) return asks
  const want = meter.recent(self)
  if (want === undefined) return asks
  const need = Math.ceil(want - freeOf(limit, regions, self, fields))
  if (need <= 0) return asks
  const peers = regions.filter((region) => region !== self)
  const frees = peers.map((peer) => freeOf(limit, regions, peer, fields))
  const spares = peers.map((peer, i) => Math.max(0, frees[i] - (meter.recent(peer) ?? 0)))
  const weights = sum(spares) > 0 ? spares : sum(frees) > 0 ? frees : peers.map(() => 1)
  const total = sum(weights)
  peers.forEach((peer, i) => {
    if (weights[i] <= 0) return
    asks.set(peer, { need: Math.ceil((need * weights[i]) / total), known: fields.get(grantField(peer, self)) ?? 0 })
  })
  return asks
}

function sum(values: readonly number[]): number {
  let total = 0
  for (const value of values) total += value
  return total
}
