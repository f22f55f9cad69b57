// One peer region: its Redis connection, and what this process knows of the link's health.

import type { Connection } from '../stores/redis/connection.js'
import type { TrackedEntry } from './usage-tracker.js'

/** Most entries kept for a peer that could not be reached (the oldest go first). */
const MAX_UNSENT = 100_000

/** A peer's link as metrics and /readyz report it. */
export interface PeerStatus {
  readonly name: string
  /** The last exchange succeeded (false after a failure or timeout, or before the first). */
  readonly connected: boolean
  /** Process-clock ms of the end of the last successful exchange; undefined before the first. */
  readonly lastHeardAt: number | undefined
  /**
   * How old the freshest state this process holds from the peer is, in ms (now − the start of
   * the last successful exchange); undefined before the first.
   */
  readonly lagMs: number | undefined
  /** How long the last successful exchange took (ms): the link's round trips plus the peer's work. */
  readonly exchangeMs: number | undefined
  /** Usage hashes sent to the peer, and received from it (merged into this region), since start. */
  readonly sent: number
  readonly received: number
  /** Exchanges that failed or timed out, since start. */
  readonly failures: number
}

/** A peer's connection and counters; the replicator updates them, stats read them. */
export class PeerLink {
  connected = false
  lastStartedAt: number | undefined
  lastHeardAt: number | undefined
  exchangeMs: number | undefined
  sent = 0
  received = 0
  failures = 0
  /** Exchanges still running (also those past their timeout): past a few, the next waits rather than pile on. */
  inFlight = 0
  /** Entries this process could not send to the peer yet (unreachable, or timed out): sent with the next exchange. */
  private readonly unsent = new Map<string, TrackedEntry>()

  constructor(
    readonly name: string,
    readonly connection: Connection,
    /** The connection was created here (closed with the sync) rather than given. */
    readonly owned: boolean,
  ) {}

  /** Counts `work` (calls on the peer's link) in `inFlight` until it settles, timed out or not. */
  track<T>(work: Promise<T>): Promise<T> {
    this.inFlight++
    const settle = () => {
      this.inFlight--
    }
    work.then(settle, settle)
    return work
  }

  /** Records a successful exchange that started at `startedAt` and ended at `endedAt`. */
  heard(startedAt: number, endedAt: number): void {
    this.connected = true
    // Exchanges overlap: one that started before the last one heard says nothing newer.
    if (this.lastStartedAt !== undefined && startedAt < this.lastStartedAt) return
    this.lastStartedAt = startedAt
    this.lastHeardAt = endedAt
    this.exchangeMs = endedAt - startedAt
  }

  /** Records a failed exchange; its entries go with the next one. */
  failed(entries: readonly TrackedEntry[]): void {
    this.connected = false
    this.failures++
    this.defer(entries)
  }

  /** Keeps entries for the next exchange without counting a failure (the link is busy, not down). */
  defer(entries: readonly TrackedEntry[]): void {
    for (const entry of entries) {
      this.unsent.delete(entry.id)
      this.unsent.set(entry.id, entry)
      if (this.unsent.size > MAX_UNSENT) this.unsent.delete(this.unsent.keys().next().value!)
    }
  }

  /**
   * The tick's entries plus those left over from earlier exchanges, at most `max`: the newest go
   * first (the tick's own), and what does not fit waits for the next exchange.
   */
  withUnsent(entries: readonly TrackedEntry[], max: number): TrackedEntry[] {
    if (this.unsent.size === 0 && entries.length <= max) return entries as TrackedEntry[]
    const all = new Map<string, TrackedEntry>()
    for (const entry of entries) if (all.size < max) all.set(entry.id, entry)
    for (const [id, entry] of this.unsent) {
      if (all.size >= max) break
      if (!all.has(id)) all.set(id, entry)
      this.unsent.delete(id)
    }
    for (const entry of entries) if (!all.has(entry.id)) this.defer([entry])
    return [...all.values()]
  }

  status(now: number): PeerStatus {
    return {
      name: this.name,
      connected: this.connected,
      lastHeardAt: this.lastHeardAt,
      lagMs: this.lastStartedAt === undefined ? undefined : Math.max(0, now - this.lastStartedAt),
      exchangeMs: this.exchangeMs,
      sent: this.sent,
      received: this.received,
      failures: this.failures,
    }
  }
}
