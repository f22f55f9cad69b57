// Split mode's part of a tick: take peers' asks, hand them units this region will not need, and work out what to ask peers for.
//
// Units only move by the rule of allotments.ts (charged to the giver's own state first, raised
// at the receiver on hearing), so nothing here can admit past the limit; what is decided here is
// only where units go, and that follows recent demand (demand.ts): a region keeps what it was
// asked for over the last horizon, and what it holds beyond that goes to peers that asked.

import { outstanding, planGives, shortfall } from './allotments.js'
import { askKey, popAsks, type Ask } from './asks.js'
import { grantField } from './crdt.js'
import { asksOf, DemandMeter } from './demand.js'
import { regionalPolicy, windowOf } from './region-policy.js'
import type { RegionContext } from './replicator.js'
import type { TrackedEntry } from './usage-tracker.js'

/** The asking region an ask of an older version is kept under: it names no region and no need. */
const LEGACY = ''

/**
 * The entry's demand meter, made on first use with a first sample of the copy as this process
 * holds it (empty if it has none: then the region's whole count reads as recent until a horizon
 * has passed, so a process that knows nothing of a key holds its units back rather than give
 * away what other processes of its region are using).
 */
export function meterOf(ctx: RegionContext, entry: TrackedEntry, now: number): DemandMeter {
  if (entry.meter === undefined) {
    entry.meter = new DemandMeter(ctx.regions, ctx.horizonMs)
    entry.meter.observe(now, ctx.views.fields(entry.id))
  }
  return entry.meter
}

/** Takes the asks peers left for this region, keeps them in the book, and marks their entries for this tick. */
export async function activateAsks(ctx: RegionContext, now: number): Promise<void> {
  if (ctx.peers.length === 0) return
  const asks = await popAsks(ctx.local, askKey(ctx.prefix, ctx.region))
  for (const ask of asks) {
    const policy = ctx.policies.get(ask.policy.name) ?? ask.policy
    if (policy.regions !== 'split' || ask.window !== windowOf(now, policy.periodMs)) continue
    if (ask.from !== undefined && (ask.from === ctx.region || !ctx.regions.includes(ask.from))) continue
    const entry = ctx.tracker.entry(ask.key, policy, ask.window)
    if (entry === undefined) continue
    meterOf(ctx, entry, now)
    const from = ask.from ?? LEGACY
    ctx.asks.note(entry.id, from, { need: ask.need ?? 0, known: ask.known ?? 0 }, now)
    ctx.tracker.touch(entry)
  }
}

/** Samples the demand of the tick's split entries of the current window (after the merge refreshed their copies). */
export function observeDemand(ctx: RegionContext, entries: readonly TrackedEntry[], now: number): void {
  for (const entry of entries) {
    if (!isCurrentSplit(entry, now)) continue
    meterOf(ctx, entry, now).observe(now, ctx.views.fields(entry.id))
  }
}

/**
 * Hands units to peers that asked: each hand-over is first charged to this region's own state
 * (atomically, like a decision), and only then counted as given; the peer raises its limit when
 * it hears of it. A region gives what it holds beyond its own demand over the last horizon, so
 * units flow back from a region whose clients left, however short it was before.
 */
export async function handOver(ctx: RegionContext, entries: readonly TrackedEntry[], now: number): Promise<TrackedEntry[]> {
  const giving: TrackedEntry[] = []
  for (const entry of entries) {
    if (!isCurrentSplit(entry, now)) continue
    const wants = wantsOf(ctx, entry, now)
    if (wants === undefined) continue
    const mine = meterOf(ctx, entry, now).recent(ctx.region)
    if (mine === undefined) continue
    const policy = entry.policy
    const fields = ctx.views.fields(entry.id)
    const regional = regionalPolicy(policy, 'split', { current: fields, previous: new Map() }, ctx.regions, ctx.region, now)
    const charging = [{ ...regional, blockMs: 0, shadow: false }]
    const [peek] = await ctx.store.evaluate([{ key: entry.key, policies: charging, cost: 0, now }])
    const gives = planGives(peek.results[0].remaining - mine, wants)
    for (const [peer, units] of gives) {
      const [charged] = await ctx.store.evaluate([{ key: entry.key, policies: charging, cost: units, now }])
      if (!charged.allowed) break
      ctx.tracker.give(entry, peer, units)
      ctx.counters.unitsGiven += units
      if (!giving.includes(entry)) giving.push(entry)
    }
  }
  return giving
}

// What each asking peer still wants from this region (undefined when none does): its ask less
// what this region gave it since it asked. An ask of an older version stands for every peer's
// shortfall over the whole window, as that version gave.
function wantsOf(ctx: RegionContext, entry: TrackedEntry, now: number): Map<string, number> | undefined {
  const asks = ctx.asks.live(entry.id, now)
  if (asks === undefined) return undefined
  const fields = ctx.views.fields(entry.id)
  const wants = new Map<string, number>()
  for (const [peer, ask] of asks) {
    if (peer === LEGACY) continue
    const want = outstanding(ask, fields.get(grantField(ctx.region, peer)) ?? 0)
    if (want > 0) wants.set(peer, want)
  }
  if (asks.has(LEGACY)) {
    for (const peer of ctx.regions) {
      if (peer === ctx.region || wants.has(peer)) continue
      const short = shortfall(entry.policy.limit, ctx.regions, peer, fields)
      if (short > 0) wants.set(peer, short)
    }
  }
  return wants.size > 0 ? wants : undefined
}

/** What this region asks each peer for this tick, for the tick's split entries of the current window. */
export function asksToSend(ctx: RegionContext, entries: readonly TrackedEntry[], now: number): Map<string, Ask[]> {
  const out = new Map<string, Ask[]>()
  for (const entry of entries) {
    if (!isCurrentSplit(entry, now) || entry.meter === undefined) continue
    const fields = ctx.views.fields(entry.id)
    for (const [peer, ask] of asksOf(entry.policy.limit, ctx.regions, ctx.region, fields, entry.meter)) {
      let list = out.get(peer)
      if (list === undefined) out.set(peer, (list = []))
      list.push({ key: entry.key, policy: entry.policy, window: entry.window, from: ctx.region, need: ask.need, known: ask.known })
    }
  }
  return out
}

function isCurrentSplit(entry: TrackedEntry, now: number): boolean {
  return entry.policy.regions === 'split' && entry.window === windowOf(now, entry.policy.periodMs)
}
