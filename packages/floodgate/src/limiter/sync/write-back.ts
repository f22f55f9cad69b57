// Write-back sync: decide from a local copy of each key, flush the units admitted every flushMs as one
// batched merge, and take the store's answer as the new copy (docs/sync.md derives the bound).

import { randomBytes } from 'node:crypto'
import { createEvaluation, type PolicyRecord } from '../../core/evaluate.js'
import { FloodgateError } from '../../core/errors.js'
import type { Policy } from '../../core/policy.js'
import type { MergeRequest, MergeResponse, Store } from '../../stores/store.js'
import { applySynced, createEntry, decideLocally, isClean, leftForFleet, ownRecords, tallyAdmit, type Entry } from './write-back-entry.js'
import {
  DEFAULT_TIMERS,
  wholeAtLeast,
  type WriteBackOptions,
  type WriteBackResponse,
  type WriteBackStats,
  type WriteBackTimers,
} from './write-back-options.js'

import { EARLY_REFRESHES, provisionalUnits, staleReadMs } from './write-back-bounds.js'

export type { WriteBackOptions, WriteBackResponse, WriteBackStats, WriteBackTimers } from './write-back-options.js'

/**
 * Decides keys from local copies and keeps the copies in step with the store.
 *
 * - A key's first decision (and one after the key sat unused for 20 flush intervals, at least a
 *   second) waits for the store's current state (a merge of 0 units), at most `timeoutMs`; every
 *   other decision is local and synchronous.
 * - Every flush interval, the units each key admitted go to the store in one `merge` batch (RedisStore:
 *   one script call per node), each key's with this instance's origin and a new seq; the answer (every
 *   instance's units) becomes the key's copy, with what was admitted meanwhile merged back in.
 * - A flush that fails or times out keeps its units and sends them again with the same seq, so a flush
 *   whose answer was lost counts once. Meanwhile decisions go on from the copies.
 */
export class WriteBack {
  readonly origin: string
  readonly stats: WriteBackStats = { calls: 0, failed: 0, replays: 0, refused: 0, oldestAnswerMs: 0 }
  private readonly store: Store & Required<Pick<Store, 'merge'>>
  private readonly instances: number
  private readonly maxKeys: number
  private readonly timeoutMs: number
  private readonly clock: () => number
  private readonly timers: WriteBackTimers
  // Entries by policy set (by identity) and key: two sets for one key are two entries.
  private readonly entries = new WeakMap<readonly Policy[], Map<string, Entry>>()
  // The last array a decision looked up and its map: a limiter asks for one set nearly always.
  private lastArray: readonly Policy[] | undefined
  private lastEntries: Map<string, Entry> | undefined
  // Every entry, oldest first: what a new key looks through for one to replace.
  private readonly order = new Set<Entry>()
  // Entries with something for the next flush: units, an unconfirmed outbox, or a read to refresh.
  private readonly dirty = new Set<Entry>()
  private readonly evaluation = createEvaluation()
  private seq = 0
  private calls = 0
  // The store's clock less ours, as the last answer showed: decisions read the store's time.
  private offset = 0
  private tickMs = Infinity
  // The flush timer armed last and when it falls due; an earlier one that fires later does nothing.
  private timer = 0
  private timerCount = 0
  private timerDueAt = Infinity
  private flushing: Promise<void> | undefined
  private closed = false
  // The last call to the store failed: decisions stop waiting for reads until one succeeds.
  private storeDown = false
  // Keys waiting for this turn's read call, and read calls not answered yet (close waits for them).
  private reads: Entry[] = []
  private readonly readCalls = new Set<Promise<void>>()

  constructor(options: WriteBackOptions) {
    const store = options.store
    if (typeof store?.merge !== 'function') {
      throw new FloodgateError(
        'INVALID_OPTION',
        'store: write-back sync needs a store with merge() (MemoryStore, RedisStore); this one has none',
      )
    }
    this.store = store as Store & Required<Pick<Store, 'merge'>>
    this.instances = wholeAtLeast(options.instances ?? 1, 1, 'instances')
    this.maxKeys = wholeAtLeast(options.maxKeys ?? 100_000, 1, 'maxKeys')
    this.timeoutMs = wholeAtLeast(options.timeoutMs ?? 100, 1, 'timeoutMs')
    this.clock = options.clock ?? Date.now
    this.timers = options.timers ?? DEFAULT_TIMERS
    this.origin = options.origin ?? `wb-${randomBytes(9).toString('base64url')}`
  }

  /** Keys held now. */
  get size(): number {
    return this.order.size
  }

  /** Units admitted here that the store has not confirmed yet, over every key. */
  get unsynced(): number {
    let units = 0
    for (const entry of this.dirty) units += entry.pending + (entry.outbox?.units ?? 0)
    return units
  }

  /** The store's records for the key as its last answer had them (every instance's units then), or undefined. */
  synced(key: string, policies: readonly Policy[]): PolicyRecord[] | undefined {
    const synced = this.entries.get(policies)?.get(key)?.synced
    return synced === undefined ? undefined : ownRecords(synced)
  }

  /** The store's clock as this instance estimates it. */
  now(): number {
    return this.clock() + this.offset
  }

  /**
   * `decide`'s usual case, answered here: the key is held, fresh, and nobody waits for its read.
   * Otherwise undefined, with nothing changed, and the caller goes on with `decide`. The answer's
   * results are valid until the next decision, as `decide`'s synchronous ones.
   */
  tryLocal(key: string, policies: readonly Policy[], cost: number): WriteBackResponse | undefined {
    if (this.closed) return undefined
    if (policies !== this.lastArray) {
      this.lastArray = policies
      this.lastEntries = this.entries.get(policies)
    }
    const entry = this.lastEntries?.get(key)
    if (entry === undefined || entry.waiters !== undefined) return undefined
    const localNow = this.clock()
    if (this.needsRead(entry, localNow)) return undefined
    if (entry.provisional !== undefined && cost > entry.provisional) return undefined
    return this.answer(entry, cost, false, localNow)
  }

  /**
   * Decides `cost` for `key` (> 0 charges, 0 peeks, < 0 refunds) and calls `done` once, synchronously
   * when the key is held and fresh (then its results are valid until the next decision: copy them to
   * keep them). `done(error)` only for WRITE_BACK_FULL or a closed instance.
   */
  decide(key: string, policies: readonly Policy[], cost: number, done: (error: unknown, response?: WriteBackResponse) => void): void {
    if (this.closed) return done(new FloodgateError('STORE_UNAVAILABLE', 'write-back: closed; its units were flushed'))
    const entry = this.entries.get(policies)?.get(key) ?? this.admitKey(key, policies)
    if (entry === undefined) {
      this.stats.refused++
      return done(
        new FloodgateError(
          'WRITE_BACK_FULL',
          `write-back holds ${this.maxKeys} keys, every one with units the store has not taken yet (is it down?); ` +
            'this key is decided by onStoreError',
        ),
      )
    }
    const waiters = entry.waiters
    if (waiters !== undefined) {
      waiters.push(() => done(null, this.answer(entry, cost, true)))
      return
    }
    // A copy long out of date is read again; a merely stale one decides at once, and the decision
    // (touching the key) has the next flush bring it up to date. One clock read serves the decision.
    const localNow = this.clock()
    if (this.needsRead(entry, localNow)) {
      entry.provisional = provisionalUnits(entry.policies, entry.flushMs, this.instances)
      this.read(entry)
    }
    // Until the read answers, the copy may be wrong by anything: it decides at most `provisional`
    // units (docs/sync.md: the bound), and a decision past them waits for the answer.
    if (entry.provisional !== undefined && cost > entry.provisional) {
      entry.waiters = [() => done(null, this.answer(entry, cost, true))]
      return
    }
    done(null, this.answer(entry, cost, false, localNow))
  }

  /** Sends every held unit now (and waits for the answer, at most `timeoutMs`); what failed stays for the next flush. */
  flush(): Promise<void> {
    if (this.flushing !== undefined) return this.flushing
    const batch: Entry[] = []
    for (const entry of this.dirty) {
      if (entry.inFlight !== 0) continue
      if (entry.outbox === undefined && entry.pending !== 0) {
        entry.outbox = { units: entry.pending, seq: ++this.seq }
        entry.pending = 0
      }
      if (entry.outbox === undefined && !entry.touched) {
        this.dirty.delete(entry)
        entry.queued = false
        continue
      }
      entry.touched = false
      entry.early = 0
      batch.push(entry)
    }
    if (batch.length === 0) return Promise.resolve()
    // A flush outside the timer (limiter.flush()) took every key the tick would have: the next tick is
    // due an interval later, not soon with next to nothing to send (each key touched costs a merge).
    if (this.timer !== 0 && !this.closed) this.arm(this.clock() + this.tickMs)
    this.flushing = this.send(batch).finally(() => {
      this.flushing = undefined
    })
    return this.flushing
  }

  /** Flushes what is held (a last try, at most `timeoutMs`) and stops; later decisions are refused. */
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    this.timer = 0
    // A read may carry units (an early refresh): the turn's reads go out, and close waits for them.
    await new Promise(setImmediate)
    await Promise.all([...this.readCalls, this.flushing])
    await this.flush()
  }

  /** Forgets the local copy of `key` (after a reset in the store); its unsent units are dropped with it. */
  forget(key: string, policies: readonly Policy[]): void {
    const entry = this.entries.get(policies)?.get(key)
    if (entry !== undefined) this.drop(entry)
  }

  // Whether the copy is long out of date and no call is under way to refresh it (nor is the store down).
  private needsRead(entry: Entry, localNow: number): boolean {
    return localNow - entry.syncedAt > staleReadMs(entry.flushMs) && entry.inFlight === 0 && !this.storeDown
  }

  // A synchronous answer may hand out the scratch results (the caller reads them before deciding
  // again, as with Store.evaluateSync); waiters woken together get copies.
  private answer(entry: Entry, cost: number, copy: boolean, localNow = this.clock()): WriteBackResponse {
    const now = localNow + this.offset
    const evaluation = decideLocally(entry, now, cost, this.instances, this.evaluation)
    if (evaluation.allowed && cost > 0) tallyAdmit(entry, cost, localNow, this.stats)
    if (entry.shareSpent) {
      entry.shareSpent = false
      this.refreshEarly(entry, now)
    }
    if (entry.touched) this.markDirty(entry)
    const results = copy ? evaluation.results.map((result) => ({ ...result })) : evaluation.results
    return { allowed: evaluation.allowed, results, now, source: 'write-back' }
  }

  // A share ran out with nobody else on the key since the last answer: ask the store for the next now,
  // not at the tick (docs/sync.md: under-admission). With others active the tick brings it, as before.
  private refreshEarly(entry: Entry, now: number): void {
    if (!entry.alone || entry.early >= EARLY_REFRESHES || this.storeDown || this.closed) return
    if (entry.inFlight !== 0 || entry.outbox !== undefined || entry.waiters !== undefined) return
    if (leftForFleet(entry, now) < this.instances) return
    entry.early++
    this.read(entry)
  }

  // A new entry for a key, in place of the oldest clean one when full; undefined when none is clean.
  private admitKey(key: string, policies: readonly Policy[]): Entry | undefined {
    if (this.order.size >= this.maxKeys && !this.evictOne()) return undefined
    const entry = createEntry(key, policies)
    let byKey = this.entries.get(policies)
    if (byKey === undefined) {
      byKey = new Map()
      this.entries.set(policies, byKey)
      // tryLocal may have cached that this set had no map yet.
      this.lastArray = undefined
    }
    byKey.set(key, entry)
    this.order.add(entry)
    // With the store down the key starts from a fresh copy, and the flush that gets through reads it.
    if (this.storeDown) return entry
    // Otherwise it is read now, and decides from a fresh copy meanwhile within its provisional units
    // (as Gubernator's GLOBAL behaviour decides a key it has not seen from a local bucket).
    entry.provisional = provisionalUnits(policies, entry.flushMs, this.instances)
    this.read(entry)
    return entry
  }

  // Drops the oldest entry with nothing to send, looking at a bounded number of them.
  private evictOne(): boolean {
    let looked = 0
    for (const entry of this.order) {
      if (isClean(entry)) {
        this.drop(entry)
        return true
      }
      if (++looked >= EVICTION_LOOKS) break
    }
    return false
  }

  // Asks the store for the key's state now (with its units, if it has some), then answers its waiters.
  // Reads of one event-loop turn go as one call, as decisions do in RedisStore.
  private read(entry: Entry): void {
    if (entry.outbox === undefined && entry.pending !== 0) {
      entry.outbox = { units: entry.pending, seq: ++this.seq }
      entry.pending = 0
    }
    // Marked as carried now, so no flush sends it meanwhile.
    entry.inFlight = -1
    this.reads.push(entry)
    if (this.reads.length === 1) setImmediate(this.sendReads)
  }

  private readonly sendReads = (): void => {
    const reads = this.reads
    this.reads = []
    const call = this.send(reads).finally(() => this.readCalls.delete(call))
    this.readCalls.add(call)
  }

  private send(batch: Entry[]): Promise<void> {
    const call = ++this.calls
    this.stats.calls++
    const requests: MergeRequest[] = batch.map((entry) => {
      entry.inFlight = call
      const outbox = entry.outbox
      return outbox === undefined
        ? { key: entry.key, policies: entry.policies, units: 0 }
        : { key: entry.key, policies: entry.policies, units: outbox.units, origin: this.origin, seq: outbox.seq }
    })
    return new Promise<void>((resolve) => {
      let settled = false
      const settle = (responses: MergeResponse[] | undefined): void => {
        if (settled) return
        settled = true
        this.settle(call, batch, responses)
        resolve()
      }
      this.timers.setTimeout(() => settle(undefined), this.timeoutMs).unref?.()
      let pending: Promise<MergeResponse[]>
      try {
        pending = this.store.merge(requests)
      } catch {
        return settle(undefined)
      }
      pending.then(settle, () => settle(undefined))
    })
  }

  // The store's answer for a call (undefined: failed or timed out), applied to every entry it carried.
  private settle(call: number, batch: Entry[], responses: MergeResponse[] | undefined): void {
    const receivedAt = this.clock()
    this.storeDown = responses === undefined
    if (responses === undefined) this.stats.failed++
    if (responses !== undefined && responses.length > 0) this.offset = responses[0].now - receivedAt
    for (let i = 0; i < batch.length; i++) {
      const entry = batch[i]
      if (entry.inFlight !== call) continue
      entry.inFlight = 0
      const response = responses?.[i]
      // An answer, or a failure (the store is down: decisions go on from the copy, as they do for
      // every key then), ends the provisional units.
      entry.provisional = undefined
      if (response !== undefined) {
        if (!response.applied) this.stats.replays++
        // Confirmed: the store holds the outbox's units now (this time, or in an earlier send).
        const confirmed = entry.outbox?.units ?? 0
        entry.outbox = undefined
        applySynced(entry, ownRecords(response.records), response.now, receivedAt, confirmed)
      }
      // Still to send (units, or an unconfirmed outbox), or just read: the next flush looks at it.
      if (entry.outbox !== undefined || entry.pending !== 0) this.markDirty(entry)
      const waiters = entry.waiters
      if (waiters !== undefined) {
        entry.waiters = undefined
        for (const wake of waiters) wake()
      }
    }
  }

  // Puts the entry in the next flush, and makes sure a flush is scheduled within its interval.
  private markDirty(entry: Entry): void {
    // Every admission of a key lands here: the flag spares a Set lookup when it is already queued.
    if (!entry.queued) {
      entry.queued = true
      this.dirty.add(entry)
    }
    if (this.closed || (this.timer !== 0 && entry.flushMs >= this.tickMs)) return
    if (entry.flushMs < this.tickMs) this.tickMs = entry.flushMs
    const dueAt = this.clock() + this.tickMs
    if (this.timer !== 0 && this.timerDueAt <= dueAt) return
    this.arm(dueAt)
  }

  private arm(dueAt: number): void {
    const timer = ++this.timerCount
    this.timer = timer
    this.timerDueAt = dueAt
    this.timers.setTimeout(() => this.tick(timer), this.tickMs).unref?.()
  }

  private tick(timer: number): void {
    if (timer !== this.timer) return
    this.timer = 0
    this.timerDueAt = Infinity
    void this.flush().then(() => {
      if (this.dirty.size > 0 && !this.closed && this.timer === 0) this.arm(this.clock() + this.tickMs)
    })
  }

  private drop(entry: Entry): void {
    this.entries.get(entry.policies)?.delete(entry.key)
    this.order.delete(entry)
    this.dirty.delete(entry)
    entry.queued = false
  }
}

/** How many held keys a new key looks through for a clean one to replace before it is refused. */
const EVICTION_LOOKS = 64
