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

/** Samples are kept at least a horizon / this apart (a closer one replaces the newest): ~10 per entry at most. */
const SAMPLES_PER_HORIZON = 8
/** A bound whatever the clock does. */
const MAX_SAMPLES = 16

/**
 * Samples of every region's cumulative demand for one entry, as this process saw them, in one flat
 * array: each sample is `at, d(region 0), d(region 1), …` in the regions' sorted order. Of the
 * samples older than `at - horizonMs` only the newest is kept: the base recent growth is measured from.
 */
export class DemandMeter {
  private readonly data: number[] = []
  private readonly width: number

  constructor(
    private readonly regions: readonly string[],
    private readonly horizonMs: number,
  ) {
    this.width = regions.length + 1
  }

  /** Records the counts of `fields` at `at`. The first sample always stays until a later one is a horizon old. */
  observe(at: number, fields: UsageFields): void {
    const { data, width } = this
    let n = data.length / width
    if (n > 1 && (at <= data[(n - 1) * width] || at - data[(n - 2) * width] < this.horizonMs / SAMPLES_PER_HORIZON)) {
      data.length = --n * width
    }
    data.push(at)
    for (const region of this.regions) data.push(fields.get(demandField(region)) ?? 0)
    n++
    let drop = Math.max(0, n - MAX_SAMPLES)
    while (n - drop > 2 && data[(drop + 1) * width] <= at - this.horizonMs) drop++
    if (drop > 0) data.splice(0, drop * width)
  }

  /**
   * What `region` wants for the next horizon, as this process heard of its demand: the larger of
   * what it was asked for over the last horizon and its rate since the sample before the last
   * taken over a horizon; undefined before two samples. The second reads a burst at once, and
   * drops to nothing the moment a region's clients leave, so the first keeps a region that just
   * went quiet from giving away all at once. A span is never taken as shorter than a fifth of the
   * horizon (about an interval), so one request just before a tick never reads as a flood, and a
   * base older than the horizon (an entry not looked at for a while) scales down to its average.
   */
  recent(region: string): number | undefined {
    const { data, width, horizonMs } = this
    const n = data.length / width
    const index = this.regions.indexOf(region) + 1
    if (n < 2) return undefined
    if (index === 0) return 0
    const last = (n - 1) * width
    const before = (n - 2) * width
    const overHorizon = ((data[last + index] - data[index]) * horizonMs) / Math.max(horizonMs, data[last] - data[0])
    const lately = ((data[last + index] - data[before + index]) * horizonMs) / Math.max(horizonMs / 5, data[last] - data[before])
    return Math.max(overHorizon, lately)
  }

  /** How much `region`'s demand grew between the last two samples (0 before two). */
  lastGrowth(region: string): number {
    const { data, width } = this
    const n = data.length / width
    const index = this.regions.indexOf(region) + 1
    if (n < 2 || index === 0) return 0
    return data[(n - 1) * width + index] - data[(n - 2) * width + index]
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
