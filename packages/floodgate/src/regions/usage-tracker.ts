// What this process admitted, was asked for and handed away, per (key, policy, window): cumulative, until merged.

import type { Policy } from '../core/policy.js'
import type { DemandMeter } from './demand.js'

/** One (key, policy, window) this process has counted in. */
export interface TrackedEntry {
  readonly id: string
  readonly key: string
  /** The policy as the limiter gave it to the store (before any regional limit). */
  readonly policy: Policy
  readonly window: number
  /**
   * This entry's process id in the hash (`o|<origin>|…`): new for every entry made, so counts of
   * an entry dropped from memory and made again start a fresh G-counter entry instead of being
   * hidden behind the old cumulative.
   */
  readonly origin: string
  /** Units admitted, units asked for, units handed to each peer: cumulative, only growing. */
  used: number
  demand: number
  readonly given: Map<string, number>
  /** Bumped by every count; the entry has unmerged counts while it differs from `mergedVersion`. */
  version: number
  /** The version last merged into the region's store (a merge in flight leaves later counts dirty). */
  mergedVersion: number
  /** Asked for by a peer short of units (split), or touched by a decision, since the last tick. */
  active: boolean
  /** Shared fields peers told this process about, not yet merged into the region's store. */
  learned: Map<string, number>
  /** Split mode: the region's recent demand as this process sampled it (hand-over.ts), made on first use. */
  meter?: DemandMeter
}

/** True while the entry has counts not yet merged into the region's store. */
export function isDirty(entry: TrackedEntry): boolean {
  return entry.version !== entry.mergedVersion
}

/** The entry id of (key, policy, window). */
export function entryId(key: string, policy: Policy, window: number): string {
  return `${key}\u0000${policy.name}\u0000${window}`
}

/**
 * Cumulative per-process counts, bounded to `maxEntries`. When full, entries already merged are
 * dropped first (their counts are in the store); an entry with unmerged counts is never dropped,
 * and counting into a new entry then waits: `record` returns false and the caller counts the loss.
 */
export class UsageTracker {
  private readonly entries = new Map<string, TrackedEntry>()
  // Entries counted in, given from or asked about since the last tick: what the tick looks at,
  // without a walk over every entry held.
  private readonly touched = new Set<TrackedEntry>()
  private serial = 0

  constructor(
    private readonly processId: string,
    private readonly maxEntries: number,
  ) {}

  get size(): number {
    return this.entries.size
  }

  /** The entry of (key, policy, window), made if needed; undefined when full of unmerged entries. */
  entry(key: string, policy: Policy, window: number): TrackedEntry | undefined {
    const id = entryId(key, policy, window)
    let entry = this.entries.get(id)
    if (entry !== undefined) return entry
    if (this.entries.size >= this.maxEntries && !this.dropOneMerged()) return undefined
    const origin = `${this.processId}.${(++this.serial).toString(36)}`
    entry = {
      id,
      key,
      policy,
      window,
      origin,
      used: 0,
      demand: 0,
      given: new Map(),
      version: 0,
      mergedVersion: 0,
      active: false,
      learned: new Map(),
    }
    this.entries.set(id, entry)
    return entry
  }

  /** Counts a decision into an entry of this tracker: `asked` units were asked for, `admitted` of them admitted. */
  count(entry: TrackedEntry, asked: number, admitted: number): void {
    entry.demand += asked
    entry.used += admitted
    entry.version++
    this.touch(entry)
  }

  /** Marks the entry for the next tick (merged if dirty, exchanged either way). */
  touch(entry: TrackedEntry): void {
    entry.active = true
    this.touched.add(entry)
  }

  /** Counts units handed to `peer` (already charged to this region's state). */
  give(entry: TrackedEntry, peer: string, units: number): void {
    entry.given.set(peer, (entry.given.get(peer) ?? 0) + units)
    entry.version++
  }

  /**
   * Entries to merge or look at this tick: those touched since the last one. Clears their `active`
   * mark; one whose merge fails stays dirty and is handed back with `touch`.
   */
  takeActive(): TrackedEntry[] {
    const out: TrackedEntry[] = []
    for (const entry of this.touched) {
      if (!this.entries.has(entry.id)) continue
      out.push(entry)
      entry.active = false
    }
    this.touched.clear()
    return out
  }

  /** Drops merged entries of windows before `oldestWindow(entry)`: their counts are in the store. */
  prune(oldestWindow: (entry: TrackedEntry) => number): void {
    for (const entry of this.entries.values()) {
      if (!isDirty(entry) && entry.window < oldestWindow(entry)) this.drop(entry)
    }
  }

  /** Every entry (for close: merge what is left). */
  all(): TrackedEntry[] {
    return [...this.entries.values()]
  }

  private dropOneMerged(): boolean {
    for (const entry of this.entries.values()) {
      if (!isDirty(entry)) {
        this.drop(entry)
        return true
      }
    }
    return false
  }

  private drop(entry: TrackedEntry): void {
    this.entries.delete(entry.id)
    this.touched.delete(entry)
  }
}
