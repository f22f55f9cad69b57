// What one instance holds of one key on leases, and the ids its leases take.

import { getRandomValues } from 'node:crypto'
import type { PolicyResult } from '../../core/evaluate.js'
import type { EvaluateResponse } from '../../stores/store.js'
import type { Policy } from '../../core/policy.js'
import { Demand } from './demand.js'
import type { LeaseCallback } from './lease-sync-options.js'

// One decision waiting for a store call.
export interface Waiter {
  readonly cost: number
  readonly done: LeaseCallback
  /** When its caller stops waiting (performance.now() terms), if it has a timeout: see LeaseRequest.deadline. */
  readonly deadline: number | undefined
  /** The caller stopped waiting (its timeout answered it): its units stay in the lease. */
  cancelled: boolean
}

// What this instance holds of one key (for one policy set), and the key's demand: a Demand itself,
// so that an in-process decision reads and writes one object per key (with the demand apart, every
// decision of a busy instance paid a second cache miss).
export class Holding extends Demand {
  /** The lease (0: none), its units left and granted, when it ends and began (local clock). */
  id = 0
  balance = 0
  granted = 0
  expiresAt = 0
  startedAt = 0
  /** When the lease was granted, on the epoch clock (concurrency releases compare with it). */
  grantedAt = 0
  /** The store's answer at the grant: what the key had left then, and its resets. */
  results: readonly PolicyResult[] = []
  /** Decisions waiting for the store call under way; never any unless `busy`. */
  readonly waiting: Waiter[] = []
  /** A store call for this key is in flight. */
  busy = false
  /**
   * Where `auto` follows the key's heat: its slot in the heat table and the stamp the slot had then
   * (HeatTable.stampOf), so that a hot key's decision finds both with one lookup, this holding's.
   */
  heatSlot = -1
  heatStamp = 0

  constructor(
    readonly key: string,
    /** The map of its policy set that holds it. */
    readonly keys: Map<string, Holding>,
    readonly policies: readonly Policy[],
    readonly leaseMs: number,
    readonly leaseMax: number,
    public lastUsed: number,
  ) {
    super(leaseMs)
  }

  /** Whether its lease is live at `now`. */
  isLive(now: number): boolean {
    return this.id !== 0 && now < this.expiresAt
  }

  /** Forgets its lease (ended, expired or given back). */
  clear(): void {
    this.id = 0
    this.balance = 0
    this.granted = 0
    this.expiresAt = 0
  }

  /**
   * Whether a key has gone quiet: unused for a quarter of its lease time (at least a sweep), or for
   * four of its own gaps between requests when those are longer (a key asked three times a second
   * is not quiet after 250 ms).
   */
  isQuiet(now: number, sweepMs: number): boolean {
    const rate = this.estimate(now)
    const gaps = rate > 0 ? 4 / rate : 0
    return now - this.lastUsed >= Math.max(sweepMs, this.leaseMs / 4, gaps)
  }

  /**
   * The lease a key's demand calls for: what it is asked for in one lease time, with a quarter more
   * so that noise does not end it early (what is left goes back), at most `leaseMax`.
   */
  wanted(now: number): number {
    return Math.min(this.leaseMax, Math.ceil(this.estimate(now) * this.leaseMs * 1.25))
  }

  // An in-process answer: what this instance can still admit plus what the key had left at the
  // grant (others may have taken some since), and the resets as they were then, counted down.
  //
  // `into` (the engine's scratch) is rewritten in place: an answer given synchronously is read
  // before the next decision, as Store.evaluateSync's are; waiters answered together get their own.
  respond(now: number, epochOffset: number, into?: EvaluateResponse): EvaluateResponse {
    const elapsed = Math.max(0, Math.floor(now - this.startedAt))
    const response = into ?? { allowed: true, results: [], now: 0 }
    const results = response.results as PolicyResult[]
    for (let i = 0; i < this.policies.length; i++) {
      const at = this.results[i]
      const result = results[i] ?? (results[i] = { allowed: true, remaining: 0, resetMs: 0, retryAfterMs: 0, delayMs: 0, blocked: false })
      result.allowed = true
      result.remaining = this.balance + (at?.remaining ?? 0)
      result.resetMs = Math.max(0, (at?.resetMs ?? 0) - elapsed)
      result.retryAfterMs = 0
      result.delayMs = 0
      result.blocked = false
    }
    // The scratch answers every policy set in turn: no results of a longer one may stay behind.
    if (results.length !== this.policies.length) results.length = this.policies.length
    response.allowed = true
    response.now = Math.floor(now + epochOffset)
    return response
  }
}

// Random words for lease ids, drawn for 256 ids at a time: a draw costs far more than the words it
// returns, and a busy instance takes a lease per key about once a lease time.
const idWords = new Uint32Array(512)
let nextWord = idWords.length

/** A whole number in [1, 2^53): the lease ids of all instances must not meet on one key. */
export function newLeaseId(): number {
  if (nextWord === idWords.length) {
    getRandomValues(idWords)
    nextWord = 0
  }
  const id = (idWords[nextWord] & 0x1fffff) * 0x100000000 + idWords[nextWord + 1] + 1
  nextWord += 2
  return id
}
