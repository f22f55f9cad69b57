// The sync loop's one step (a tick): merge this process's counts into the region, hand units to short peers, exchange with peers.
//
// Nothing here is on a request's path: decisions read the copies this step keeps fresh. Every
// write is a merge by maximum of grow-only counters (usage.lua), so a tick that fails half-way,
// times out or runs twice leaves every hash as if each count had been applied exactly once; the
// entries stay dirty and go again next tick.

import type { Policy } from '../core/policy.js'
import type { LeaseStore, Store } from '../stores/store.js'
import type { Connection } from '../stores/redis/connection.js'
import { isSharedField, mergeInto } from './crdt.js'
import { activateAsks, asksToSend, handOver, observeDemand } from './hand-over.js'
import type { PeerLink } from './peer-link.js'
import { forcedChargePolicy, isWindowed, windowOf } from './region-policy.js'
import { entryId, isDirty, type TrackedEntry, type UsageTracker } from './usage-tracker.js'
import { mergeUsageBatch, usageKey, type MergeItem, type MergeReply } from './usage-script.js'
import type { UsageViews } from './usage-views.js'
import { askKey, pushAsks, type Ask, type AskBook } from './asks.js'

/** Everything a tick works with; owned by RegionSync. */
export interface RegionContext {
  readonly region: string
  /** Every region's name, sorted (this one included): the order base shares follow. */
  readonly regions: readonly string[]
  readonly prefix: string
  readonly local: Connection
  /** The region's own store (the one the limiter's decisions go to). */
  readonly store: Store
  readonly peers: readonly PeerLink[]
  readonly tracker: UsageTracker
  readonly views: UsageViews
  readonly clock: () => number
  readonly intervalMs: number
  readonly timeoutMs: number
  /** Policies seen in decisions, by name: what a peer's ask names. */
  readonly policies: Map<string, Policy>
  /** Split mode: peers' asks taken from this region's list, kept while they are fresh. */
  readonly asks: AskBook
  /** Split mode: how far back demand counts as recent (demand.ts). */
  readonly horizonMs: number
  readonly counters: RegionCounters
  /** How long the last tick took (ms): a copy older than two intervals plus this is stale. */
  lastTickMs: number
}

/** Most keys sent to one peer per tick; the rest wait for the next (so a backlog drains, never times out). */
const MAX_PER_EXCHANGE = 8192
/** How often (in ticks) entries of ended windows are dropped from memory. */
const PRUNE_TICKS = 10
/** Merge calls in flight at once on a peer's link (64 keys each): a tick costs about one round trip. */
const PEER_CALLS_IN_FLIGHT = 32
/**
 * Exchanges with one peer running at once. A tick does not wait for its exchanges (a link's round
 * trip may be longer than the interval), so the next tick's may start while one is on the way; a
 * peer slower than that gets the next tick's entries later, instead of a pile of exchanges.
 */
const EXCHANGES_IN_FLIGHT = 3

/** Totals since start, for metrics. */
export interface RegionCounters {
  /** Usage hashes merged into the region's store from this process's counts. */
  merged: number
  /** Units handed to peers (split), and units of peers' use charged into this region's buckets (shared). */
  unitsGiven: number
  unitsClaimed: number
  /** Decisions whose counts could not be kept (the tracker was full of unmerged entries). */
  lost: number
  ticks: number
  failedTicks: number
}

/**
 * The merge primitive of stores that have it (write-back's `Store.merge`): units charged into a
 * key's state past the limit. Named by shape, so a store without it is used as before.
 */
interface MergeCapable {
  merge?(batch: readonly { key: string; policies: readonly Policy[]; units: number; now?: number }[]): Promise<unknown>
}

/** Runs one tick. Resolves when every part has finished or failed (never rejects). */
export async function tick(ctx: RegionContext): Promise<void> {
  await (await startTick(ctx)).exchanged
}

/**
 * Runs one tick's part in the region (merge, hand-over) and starts its exchanges with every peer.
 * Resolves once the region's part is done; `exchanged` resolves when the exchanges have finished
 * or failed. The sync loop schedules the next tick from the first, so a peer's round trip does
 * not stretch the interval at which counts and hand-overs move.
 */
export async function startTick(ctx: RegionContext): Promise<{ exchanged: Promise<void> }> {
  ctx.counters.ticks++
  const now = ctx.clock()
  const started = performance.now()
  let failed = false
  const note = (): void => {
    failed = true
  }
  await activateAsks(ctx, now).catch(note)
  const entries = ctx.tracker.takeActive()
  await mergeLocal(ctx, entries).catch(note)
  observeDemand(ctx, entries, ctx.clock())
  const giving = await handOver(ctx, entries, now).catch(() => [] as TrackedEntry[])
  await mergeLocal(ctx, giving).catch(note)
  // Counts a failed merge left behind go again next tick.
  for (const entry of entries) if (isDirty(entry) || entry.learned.size > 0) ctx.tracker.touch(entry)
  const asks = asksToSend(ctx, entries, now)
  const exchanged = Promise.all(ctx.peers.map((peer) => exchange(ctx, peer, entries, asks.get(peer.name) ?? []))).then(() => undefined)
  // Windows end rarely next to ticks: old entries are looked for every PRUNE_TICKS ticks, not every tick.
  if (ctx.counters.ticks % PRUNE_TICKS === 0) ctx.tracker.prune((entry) => windowOf(ctx.clock(), entry.policy.periodMs) - 1)
  if (failed) ctx.counters.failedTicks++
  ctx.lastTickMs = performance.now() - started
  return { exchanged }
}

/** How long a usage hash must outlive its window: the next window still reads it (sliding weight, late claims). */
export function usageTtlMs(policy: Policy, window: number, now: number, intervalMs: number): number {
  return (window + 2) * policy.periodMs - now + 10 * intervalMs
}

// Merges the entries' cumulative counts (and what peers told this process) into the region's
// hashes, in as few script calls as the store allows, and refreshes this process's copies from
// the answers. Token-bucket and GCRA entries in shared mode also claim the other regions' use, of
// their window and the one before (use heard late, after this region moved on, still counts).
async function mergeLocal(ctx: RegionContext, entries: readonly TrackedEntry[]): Promise<void> {
  if (entries.length === 0) return
  const now = ctx.clock()
  const items: MergeItem[] = []
  const claims: [TrackedEntry, number][] = []
  const versions = entries.map((entry) => entry.version)
  // What peers told this process goes to the region's store once; on failure it goes again.
  const learned = entries.map((entry) => {
    const fields = entry.learned
    entry.learned = new Map()
    return fields
  })
  for (const [i, entry] of entries.entries()) {
    const subs: [string, number][] = []
    if (entry.used > 0) subs.push(['u', entry.used])
    // Demand moves split allotments and nothing else: a shared entry does not write it.
    if (entry.demand > 0 && entry.policy.regions === 'split') subs.push(['d', entry.demand])
    for (const [peer, units] of entry.given) subs.push([`g|${peer}`, units])
    const claim = entry.policy.regions === 'shared' && !isWindowed(entry.policy.algorithm)
    const ttlMs = usageTtlMs(entry.policy, entry.window, now, ctx.intervalMs)
    const hashKey = usageKey(ctx.prefix, entry.key, entry.policy, entry.window)
    items.push({ hashKey, merge: { region: ctx.region, origin: entry.origin, entries: subs, fields: learned[i], claim, ttlMs } })
    if (claim && entry.window > 0) {
      const previous = usageKey(ctx.prefix, entry.key, entry.policy, entry.window - 1)
      const ttlMs = usageTtlMs(entry.policy, entry.window - 1, now, ctx.intervalMs)
      const merge = { region: ctx.region, origin: entry.origin, entries: [], fields: new Map(), claim: true, ttlMs }
      claims.push([entry, items.push({ hashKey: previous, merge }) - 1])
    }
  }
  let replies: MergeReply[]
  try {
    replies = await mergeUsageBatch(ctx.local, ctx.region, items)
  } catch (error) {
    entries.forEach((entry, i) => mergeInto(entry.learned, learned[i]))
    throw error
  }
  const claimed = new Map<TrackedEntry, number>()
  entries.forEach((entry, i) => {
    entry.mergedVersion = versions[i]
    ctx.counters.merged++
    ctx.views.merge(entry.id, replies[i].fields, now)
    if (replies[i].claimed > 0) claimed.set(entry, replies[i].claimed)
  })
  for (const [entry, index] of claims) {
    if (replies[index].claimed > 0) claimed.set(entry, (claimed.get(entry) ?? 0) + replies[index].claimed)
  }
  await Promise.all([...claimed].map(([entry, units]) => chargeClaimed(ctx, entry.key, entry.policy, units)))
}

/**
 * Claims and charges now what other regions used of a shared bucket (its window and the one
 * before) and this region has not charged yet. A lease call runs it first: a key served from
 * leases reaches the store once a block, so the ticks alone would charge the others' use after
 * the next block was granted, not before.
 */
export async function claimNow(ctx: RegionContext, key: string, policy: Policy, now: number): Promise<void> {
  const window = windowOf(now, policy.periodMs)
  const items: MergeItem[] = []
  for (const w of window > 0 ? [window, window - 1] : [window]) {
    const ttlMs = usageTtlMs(policy, w, now, ctx.intervalMs)
    items.push({
      hashKey: usageKey(ctx.prefix, key, policy, w),
      merge: { region: ctx.region, origin: '', entries: [], fields: new Map(), claim: true, ttlMs },
    })
  }
  const replies = await mergeUsageBatch(ctx.local, ctx.region, items)
  ctx.views.merge(entryId(key, policy, window), replies[0].fields, ctx.clock())
  const units = replies.reduce((sum, reply) => sum + reply.claimed, 0)
  if (units > 0) await chargeClaimed(ctx, key, policy, units)
}

/**
 * Charges units other regions consumed of a bucket into this region's state, once (the hash's
 * `a|` fields record what was claimed, so only the process that claimed them charges them).
 */
async function chargeClaimed(ctx: RegionContext, key: string, policy: Policy, claimed: number): Promise<void> {
  let units = claimed
  ctx.counters.unitsClaimed += units
  // On the clock decisions use (RegionStore decides regional policies on it), not the store's.
  const now = ctx.clock()
  const leased = policy.sync === 'lease' || policy.sync === 'auto'
  if (leased && policy.algorithm === 'token-bucket') {
    await takeLeased(ctx.store as LeaseStore, key, policy, units, now)
    return
  }
  // A store with the merge primitive (write-back's Store.merge) charges them past the limit: the key owes them.
  const { merge } = ctx.store as MergeCapable
  if (typeof merge === 'function') {
    await merge.call(ctx.store, [{ key, policies: [policy], units, now }])
    return
  }
  if (policy.algorithm === 'gcra') {
    await ctx.store.evaluate([{ key, policies: [forcedChargePolicy(policy)], cost: units, now }])
    return
  }
  // Without it a token bucket cannot owe: take what it holds, up to the units heard.
  const taking = { ...policy, blockMs: 0, shadow: false }
  for (let attempt = 0; attempt < 3 && units > 0; attempt++) {
    const [peek] = await ctx.store.evaluate([{ key, policies: [taking], cost: 0, now }])
    const take = Math.min(units, peek.results[0].remaining)
    if (take <= 0) return
    const [charged] = await ctx.store.evaluate([{ key, policies: [taking], cost: take, now }])
    if (charged.allowed) units -= take
  }
}

// A token bucket on leases refills only up to its burst less the units leases hold, which only a
// lease call knows (core/lease.ts); a merge or a plain decision would refill past it. So the units
// heard are taken as exact lease calls (id 0): what the bucket holds, up to the units heard.
async function takeLeased(store: LeaseStore, key: string, policy: Policy, heard: number, now: number): Promise<void> {
  const policies = [{ ...policy, blockMs: 0, shadow: false }]
  const ask = (need: number) => store.lease([{ key, policies, id: 0, want: 0, need, leaseMs: 0, returnId: 0, returnUnused: 0, now }])
  let units = heard
  for (let attempt = 0; attempt < 3 && units > 0; attempt++) {
    const [peek] = await ask(0)
    const take = Math.min(units, peek.results[0].remaining)
    if (take <= 0) return
    const [charged] = await ask(take)
    if (charged.allowed) units -= take
  }
}

// Exchanges every entry of the tick with one peer: sends this region's copy, merges the peer's
// answer into this process's copy (and into the region's hash at the next tick), and leaves the
// tick's asks for units (split) in the peer's list, in the same round trip.
async function exchange(ctx: RegionContext, peer: PeerLink, tickEntries: readonly TrackedEntry[], asks: readonly Ask[]): Promise<void> {
  if (peer.inFlight >= EXCHANGES_IN_FLIGHT) {
    // Earlier exchanges still run (a slow link, or past their timeout): these wait for the next tick.
    peer.defer(tickEntries)
    return
  }
  const entries = peer.withUnsent(tickEntries, MAX_PER_EXCHANGE)
  if (!peer.connection.isReady()) {
    if (peer.connection.isIdle()) peer.connection.connect()
    peer.failed(entries)
    return
  }
  const startedAt = ctx.clock()
  try {
    // Nothing to exchange: a heartbeat, so an idle link still tells whether the peer is there.
    if (entries.length === 0) await withTimeout(peer.track(peer.connection.evalBuffer('eval', 'return 1', [], [])), ctx.timeoutMs)
    // The peer is the authority on its own entries: sending them back would only cost bytes.
    const sent = entries.map((entry) => fieldsFor(peer.name, ctx.views.fields(entry.id)))
    const items = entries.map(
      (entry, i): MergeItem => ({
        hashKey: usageKey(ctx.prefix, entry.key, entry.policy, entry.window),
        merge: {
          region: '',
          origin: '',
          entries: [],
          fields: sent[i],
          claim: false,
          ttlMs: usageTtlMs(entry.policy, entry.window, startedAt, ctx.intervalMs),
        },
      }),
    )
    const merging = mergeUsageBatch(peer.connection, '', items, PEER_CALLS_IN_FLIGHT)
    const asking = asks.length > 0 ? pushAsks(peer.connection, askKey(ctx.prefix, peer.name), asks) : undefined
    const [replies] = await withTimeout(peer.track(Promise.all([merging, asking])), ctx.timeoutMs)
    entries.forEach((entry, i) => {
      peer.sent++
      const news = newer(ctx.views.fields(entry.id), replies[i].fields)
      if (news.size > 0) {
        peer.received++
        ctx.views.merge(entry.id, news)
        mergeInto(entry.learned, news)
        ctx.tracker.touch(entry)
      }
    })
    peer.heard(startedAt, ctx.clock())
  } catch {
    peer.failed(entries)
  }
}

// The fields of the peer's answer this process's copy lacked (or held smaller).
function newer(mine: ReadonlyMap<string, number>, theirs: ReadonlyMap<string, number>): Map<string, number> {
  const news = new Map<string, number>()
  for (const [field, value] of theirs) {
    const known = mine.get(field)
    if (known === undefined || value > known) news.set(field, value)
  }
  return news
}

// The shared fields of a copy but the peer's own (u|peer, d|peer, g|peer|…).
function fieldsFor(peer: string, fields: ReadonlyMap<string, number>): Map<string, number> {
  const out = new Map<string, number>()
  for (const [field, value] of fields) {
    if (!isSharedField(field)) continue
    const second = field.indexOf('|', 2)
    const owner = second < 0 ? field.slice(2) : field.slice(2, second)
    if (owner !== peer) out.set(field, value)
  }
  return out
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms}ms`)), ms)
    timer.unref?.()
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}
