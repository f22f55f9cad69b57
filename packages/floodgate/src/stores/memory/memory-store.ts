// The embedded store: every key's policy records in process memory, bounded in keys and bytes by
// LRU eviction that drops unrestricted keys before limited ones, decided by the same evaluateKey
// that the Redis runner mirrors.

import { createEvaluation, evaluateKeyInto, type KeyEvaluation, type PolicyRecord, type PolicyResult } from '../../core/evaluate.js'
import { FloodgateError } from '../../core/errors.js'
import type { Policy } from '../../core/policy.js'
import { ALGORITHM_BY_NAME } from '../../core/algorithms/index.js'
import { mergeKey } from '../../core/merge.js'
import type { EvaluateRequest, EvaluateResponse, LeaseRequest, LeaseResponse, LeaseStore, MergeRequest, MergeResponse } from '../store.js'
import { leaseKey, type Ledger } from '../../core/lease.js'
import { withLedgers } from './ledger-policies.js'
import { mergeRequestProblem } from '../merge-request.js'
import {
  BYTES_PER_CHARACTER,
  BYTES_PER_STATE_NUMBER,
  protectBelowOf,
  ENTRY_BYTES,
  findPolicy,
  identityIndex,
  type KeyEntry,
  markSeen,
  ownState,
  recordBytes,
  seenBefore,
  type StoredRecord,
} from './key-entry.js'
import { OldestCursor } from './oldest-cursor.js'

export interface MemoryStoreOptions {
  /**
   * Most keys kept at once (default 100 000), a strict bound: a flood of unique keys (random IPv6
   * addresses) cannot grow the process without bound. Past it a key is dropped, and a dropped key
   * starts fresh when it comes back (forgiven, never wrongly punished), so eviction chooses whom to
   * forgive carefully. Keys are kept in two classes, each in LRU order (to within half the store: a
   * key moves to the young end only when maxKeys/2 other keys moved since it last did):
   * - protected: keys whose last decision denied (blocked ones included) or that have used more
   *   than half the capacity of one of their policies. Forgetting one would hand its owner a reset.
   * - open: every other key; forgetting one gives back less than half a limit.
   *
   * A key whose records have all expired goes first (it holds nothing), then the least recently used
   * open key, and a protected key only when protected keys alone fill the store: then the least
   * recently used of them is forgiven. A flood of fresh keys therefore never resets a limited key;
   * an attacker must bring maxKeys keys of their own to their limits to force one out. Size
   * maxKeys above the number of keys you expect to be limited at once.
   */
  maxKeys?: number
  /**
   * Most memory the keys may hold, in bytes (default 64 MiB), enforced like maxKeys. Counted
   * cheaply, not measured: per key a fixed overhead plus 2 bytes per character of the key, and per
   * policy record a fixed overhead plus 8 bytes per number of its state (a sliding-log keeps one per
   * request in its window). Hash long, client-supplied keys before they get here (`boundedKey`).
   * A single key larger than maxBytes is not kept.
   */
  maxBytes?: number
  /** Milliseconds since the epoch when a request carries no `now` (default `Date.now`); tests inject one. */
  clock?: () => number
}

/**
 * An in-process `Store`: no I/O, no timers, answers synchronously. It offers `evaluateSync`, so a
 * limiter calls it without a promise or a timeout (neither can matter in-process), and
 * `limiter.limitSync` works on it.
 */
export class MemoryStore implements LeaseStore {
  readonly maxKeys: number
  readonly maxBytes: number
  private readonly clock: () => number
  // Two classes of keys (see MemoryStoreOptions.maxKeys), each a Map in LRU order: a Map iterates in
  // insertion order, so deleting and re-inserting a key on a touch makes the first key the least
  // recently used one, an O(1) LRU without a linked list. Moving costs a delete and an insert
  // (several times a lookup), so an entry moves only when more than maxKeys/2 moves happened since
  // its last one: a hot working set smaller than that never moves at all.
  private readonly open = new Map<string, KeyEntry>()
  private readonly guarded = new Map<string, KeyEntry>()
  private readonly openOldest = new OldestCursor(this.open)
  private readonly guardedOldest = new OldestCursor(this.guarded)
  private readonly moveDistance: number
  private moves = 0
  private bytes = 0
  // evaluateKeyInto reads the records and keeps no reference, so one scratch array serves every call.
  private readonly scratch: (PolicyRecord | undefined)[] = []
  // What evaluateSync answers with and evaluateOne decides into before copying the answer out.
  private readonly evaluation: KeyEvaluation & EvaluateResponse = { ...createEvaluation(), now: 0 }

  constructor(options: MemoryStoreOptions = {}) {
    if (options === null || typeof options !== 'object') {
      throw new FloodgateError('INVALID_OPTION', 'MemoryStore options: expected an object like { maxKeys: 100000 }')
    }
    const maxKeys = options.maxKeys ?? 100_000
    if (typeof maxKeys !== 'number' || !Number.isInteger(maxKeys) || maxKeys < 1) {
      throw new FloodgateError('INVALID_OPTION', `maxKeys: must be a whole number ≥ 1, got ${JSON.stringify(maxKeys)}`)
    }
    const maxBytes = options.maxBytes ?? 64 * 1024 * 1024
    if (typeof maxBytes !== 'number' || !Number.isSafeInteger(maxBytes) || maxBytes < 1) {
      throw new FloodgateError(
        'INVALID_OPTION',
        `maxBytes: must be a whole number of bytes ≥ 1, e.g. 67108864 for 64 MiB, got ${JSON.stringify(maxBytes)}`,
      )
    }
    if (options.clock !== undefined && typeof options.clock !== 'function') {
      throw new FloodgateError('INVALID_OPTION', 'clock: must be a function returning milliseconds since the epoch')
    }
    this.maxKeys = maxKeys
    this.maxBytes = maxBytes
    this.moveDistance = maxKeys >>> 1
    this.clock = options.clock ?? Date.now
  }

  /** How many keys are held now (expired ones included until they are touched or evicted). */
  get size(): number {
    return this.open.size + this.guarded.size
  }

  /** How many of them are protected from eviction by a flood (see MemoryStoreOptions.maxKeys). */
  get protectedSize(): number {
    return this.guarded.size
  }

  /** The bytes the held keys count for against maxBytes (an estimate, see MemoryStoreOptions.maxBytes). */
  get sizeBytes(): number {
    return this.bytes
  }

  /** Decides each request in order (one clock reading for the requests without `now`). */
  evaluate(batch: readonly EvaluateRequest[]): Promise<EvaluateResponse[]> {
    try {
      const out: EvaluateResponse[] = new Array(batch.length)
      let clockNow = -1
      for (let i = 0; i < batch.length; i++) {
        const request = batch[i]
        let now = request.now
        if (now === undefined) {
          if (clockNow < 0) clockNow = this.clock()
          now = clockNow
        }
        out[i] = this.evaluateOne(request.key, request.policies, request.cost, now)
      }
      return Promise.resolve(out)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /**
   * Decides one request synchronously (see `Store.evaluateSync`), allocating nothing but the
   * algorithms' new states: the answer is the store's scratch object, valid until its next call.
   */
  evaluateSync(request: EvaluateRequest): EvaluateResponse {
    const { key, policies, cost } = request
    const now = request.now ?? this.clock()
    const out = this.evaluation
    const entry = this.open.get(key) ?? this.guarded.get(key)
    const scratch = this.scratch
    if (scratch.length !== policies.length) scratch.length = policies.length
    let index: readonly number[] | undefined
    if (entry === undefined) {
      scratch.fill(undefined)
    } else {
      index = entry.lastSet === policies ? entry.lastIndex : this.indexFor(entry, policies, now)
      for (let i = 0; i < policies.length; i++) {
        const at = index[i]
        const record = entry.records[at]
        scratch[i] = record !== undefined && now < record.expiresAt ? record : undefined
      }
    }
    const evaluation = evaluateKeyInto(scratch, now, cost, policies, out)
    if (entry !== undefined) {
      const bytes = this.bytes
      this.place(key, entry, this.save(entry, index!, evaluation, now))
      if (this.bytes > bytes && this.bytes > this.maxBytes) this.makeRoom(entry, now)
    } else if (cost > 0) {
      // A peek or a refund of an unknown key leaves nothing worth keeping: its state is fresh.
      this.insert(key, policies, evaluation, now)
    }
    out.now = now
    return out
  }

  /**
   * Decides one request synchronously. Same meaning as one element of `evaluate`; `now` defaults
   * to the store's clock. The answer is the caller's to keep.
   */
  evaluateOne(key: string, policies: readonly Policy[], cost: number, now: number = this.clock()): EvaluateResponse {
    const evaluation = this.evaluateSync({ key, policies, cost, now })
    const results: PolicyResult[] = new Array(evaluation.results.length)
    for (let i = 0; i < results.length; i++) results[i] = { ...evaluation.results[i] }
    return { allowed: evaluation.allowed, results, now }
  }

  /** Merges each request's units into its key's records (see Store.merge), in order; answers copies. */
  merge(batch: readonly MergeRequest[]): Promise<MergeResponse[]> {
    try {
      const out: MergeResponse[] = new Array(batch.length)
      for (let i = 0; i < batch.length; i++) out[i] = this.mergeOne(batch[i])
      return Promise.resolve(out)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /** One merge, synchronously (see Store.merge); `now` defaults to the request's, then the store's clock. */
  mergeOne(request: MergeRequest, now: number = request.now ?? this.clock()): MergeResponse {
    const problem = mergeRequestProblem(request)
    if (problem !== undefined) throw new FloodgateError('INVALID_REQUEST', problem)
    const { key, policies, units, origin, seq } = request
    const entry = this.open.get(key) ?? this.guarded.get(key)
    const index = entry === undefined ? undefined : entry.lastSet === policies ? entry.lastIndex : this.indexFor(entry, policies, now)
    const live = policies.map((_, i) => {
      const record = entry?.records[index![i]]
      return record !== undefined && now < record.expiresAt ? record : undefined
    })
    const applied = live.map((record) => origin === undefined || !seenBefore(record, origin, seq!))
    const merged = mergeKey(
      live,
      now,
      applied.map((yes) => (yes ? units : 0)),
      policies,
    )
    // What save/insert read besides the records: each policy's remaining, to judge protection.
    const results = merged.records.map((record, i) => ({
      ...ALGORITHM_BY_NAME[policies[i].algorithm].step(record.state, now, 0, policies[i]),
      blocked: false,
    }))
    const evaluation: KeyEvaluation = { allowed: true, results, records: merged.records, ttlMs: merged.ttlMs }
    if (entry !== undefined) {
      const bytes = this.bytes
      this.place(key, entry, this.save(entry, index!, evaluation, now))
      if (this.bytes > bytes && this.bytes > this.maxBytes) this.makeRoom(entry, now)
    } else if (units !== 0) {
      this.insert(key, policies, evaluation, now)
    }
    const kept = this.open.get(key) ?? this.guarded.get(key)
    if (kept !== undefined) {
      const at = kept.lastSet === policies ? kept.lastIndex : this.indexFor(kept, policies, now)
      for (let i = 0; i < policies.length; i++) {
        const record = kept.records[at[i]]
        if (record === undefined) continue
        // A record that had expired starts with no origins, as its Redis key would.
        if (live[i] === undefined) record.seen = undefined
        if (origin !== undefined && applied[i] && units !== 0) markSeen(record, origin, seq!)
      }
    }
    const records = merged.records.map((record) => ({ blockedUntil: record.blockedUntil, state: record.state?.slice() }))
    return { records, applied: applied.every(Boolean), now }
  }

  /** Runs each lease call (see core/lease.ts) on the key's records and ledgers, one after another. */
  lease(batch: readonly LeaseRequest[]): Promise<LeaseResponse[]> {
    try {
      const clockNow = this.clock()
      return Promise.resolve(batch.map((request) => this.leaseOne(request, request.now ?? clockNow)))
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /**
   * One lease call, synchronously. A lease key keeps its ledgers as records of their own, one per
   * policy (see ledger-policies.ts), so eviction, expiry and byte accounting treat them alike.
   */
  leaseOne(request: LeaseRequest, now: number = this.clock()): LeaseResponse {
    const { key, policies } = request
    const both = withLedgers(policies)
    const entry = this.open.get(key) ?? this.guarded.get(key)
    const read: (StoredRecord | undefined)[] = new Array(both.length).fill(undefined)
    let index: readonly number[] | undefined
    if (entry !== undefined) {
      index = entry.lastSet === both ? entry.lastIndex : this.indexFor(entry, both, now)
      for (let i = 0; i < both.length; i++) {
        const record = entry.records[index[i]]
        if (record !== undefined && now < record.expiresAt) read[i] = record
      }
    }
    const count = policies.length
    const ledgers = read.slice(count).map((record) => record?.state as Ledger | undefined)
    const lease = leaseKey(read.slice(0, count), ledgers, now, request, policies)
    const evaluation: KeyEvaluation = {
      allowed: lease.allowed,
      results: [...lease.results, ...lease.results],
      records: lease.records,
      ttlMs: lease.ttlMs,
    }
    if (entry !== undefined) {
      const bytes = this.bytes
      this.place(key, entry, this.save(entry, index!, evaluation, now))
      if (this.bytes > bytes && this.bytes > this.maxBytes) this.makeRoom(entry, now)
    } else if (lease.records.some((record) => record.state !== undefined)) {
      this.insert(key, both, evaluation, now)
    }
    return {
      granted: lease.granted,
      expiresAt: lease.expiresAt,
      returned: lease.returned,
      allowed: lease.allowed,
      results: lease.results,
      now,
    }
  }

  /** Forgets the key's records of these policies (matched by name and algorithm); the key goes when none is left. */
  reset(key: string, policies: readonly Policy[]): Promise<void> {
    const entry = this.open.get(key) ?? this.guarded.get(key)
    if (entry !== undefined) {
      for (const policy of withLedgers(policies)) {
        const at = findPolicy(entry.policies, policy)
        const record = at >= 0 ? entry.records[at] : undefined
        if (record !== undefined) {
          entry.records[at] = undefined
          this.resize(entry, -recordBytes(record))
        }
      }
      if (entry.records.every((record) => record === undefined)) {
        this.remove(key, entry)
      } else if (entry.protected) {
        // What is left was restricted alongside what was reset; it is judged again when next used.
        this.guarded.delete(key)
        entry.protected = false
        this.open.set(key, entry)
        entry.movedAt = ++this.moves
      }
    }
    return Promise.resolve()
  }

  /** Forgets every key: nothing else to release, the store owns no timers or connections. */
  close(): Promise<void> {
    this.open.clear()
    this.guarded.clear()
    this.openOldest.clear()
    this.guardedOldest.clear()
    this.bytes = 0
    return Promise.resolve()
  }

  // The evaluation's records and new states are reused by the next call: their numbers are copied
  // into the entry's own record objects and state arrays, which are updated in place (no garbage,
  // and no young objects for the collector to copy because the store keeps them). Answers whether
  // the key is now to be protected.
  private save(entry: KeyEntry, index: readonly number[], evaluation: KeyEvaluation, now: number): boolean {
    const { records, ttlMs, results } = evaluation
    const protectBelow = entry.lastProtectBelow
    let restricted = !evaluation.allowed
    let deadAt = entry.deadAt
    let delta = 0
    for (let i = 0; i < index.length; i++) {
      const at = index[i]
      const expiresAt = now + ttlMs[i]
      const next = records[i]
      let record = entry.records[at]
      if (record === undefined) {
        record = { blockedUntil: next.blockedUntil, state: ownState(undefined, next.state), expiresAt }
        entry.records[at] = record
        delta += recordBytes(record)
      } else {
        const before = record.state === undefined ? 0 : record.state.length
        record.blockedUntil = next.blockedUntil
        record.state = ownState(record.state, next.state)
        record.expiresAt = expiresAt
        delta += ((record.state === undefined ? 0 : record.state.length) - before) * BYTES_PER_STATE_NUMBER
      }
      if (results[i].remaining < protectBelow[i]) restricted = true
      if (expiresAt > deadAt) deadAt = expiresAt
    }
    entry.deadAt = deadAt
    if (delta !== 0) this.resize(entry, delta)
    return restricted
  }

  // Puts a used entry in its class, at the young end when it changed class or is due a move.
  private place(key: string, entry: KeyEntry, restricted: boolean): void {
    if (entry.protected !== restricted) {
      ;(entry.protected ? this.guarded : this.open).delete(key)
      entry.protected = restricted
      ;(restricted ? this.guarded : this.open).set(key, entry)
      entry.movedAt = ++this.moves
    } else if (this.moves - entry.movedAt > this.moveDistance) {
      const held = restricted ? this.guarded : this.open
      held.delete(key)
      held.set(key, entry)
      entry.movedAt = ++this.moves
    }
  }

  private insert(key: string, policies: readonly Policy[], evaluation: KeyEvaluation, now: number): void {
    const { records, ttlMs, results } = evaluation
    const protectBelow = protectBelowOf(policies)
    let bytes = ENTRY_BYTES + key.length * BYTES_PER_CHARACTER
    for (let i = 0; i < records.length; i++) bytes += recordBytes(records[i])
    // Within both bounds, a new key sheds one dead key (the oldest open one, else the oldest
    // protected one: day windows end too) and takes over its objects, so a store whose keys lapse
    // between visits (sparse clients) recycles entries instead of feeding the collector.
    const within = this.open.size + this.guarded.size < this.maxKeys && this.bytes + bytes <= this.maxBytes
    const spare = within ? (this.dropOldestIfDead(this.openOldest, now) ?? this.dropOldestIfDead(this.guardedOldest, now)) : undefined
    const reuse = spare !== undefined && spare.records.length === records.length
    const own: (StoredRecord | undefined)[] = reuse ? spare.records : new Array(records.length)
    let restricted = !evaluation.allowed
    let deadAt = 0
    for (let i = 0; i < ttlMs.length; i++) {
      const expiresAt = now + ttlMs[i]
      const record = own[i]
      if (record === undefined) {
        own[i] = { blockedUntil: records[i].blockedUntil, state: ownState(undefined, records[i].state), expiresAt }
      } else {
        record.blockedUntil = records[i].blockedUntil
        record.state = ownState(record.state, records[i].state)
        record.expiresAt = expiresAt
      }
      if (results[i].remaining < protectBelow[i]) restricted = true
      if (expiresAt > deadAt) deadAt = expiresAt
    }
    let entry: KeyEntry
    if (spare === undefined) {
      entry = {
        policies,
        records: own,
        deadAt,
        lastSet: policies,
        lastIndex: identityIndex(policies.length),
        lastProtectBelow: protectBelow,
        movedAt: ++this.moves,
        protected: restricted,
        bytes,
      }
    } else {
      entry = spare
      entry.policies = policies
      entry.records = own
      entry.deadAt = deadAt
      entry.lastSet = policies
      entry.lastIndex = identityIndex(policies.length)
      entry.lastProtectBelow = protectBelow
      entry.movedAt = ++this.moves
      entry.protected = restricted
      entry.bytes = bytes
    }
    ;(restricted ? this.guarded : this.open).set(key, entry)
    this.bytes += bytes
    if (!within) this.makeRoom(entry, now)
  }

  // Evicts until both bounds hold: a dead entry first (it holds nothing; the oldest of each class is
  // the likeliest to be one), then the least recently used open key, and only when none is left the
  // least recently used protected key (forgiven: see MemoryStoreOptions.maxKeys). `used`, the entry
  // just decided, goes last: were it dropped, a new key would never be counted while protected keys
  // fill the store.
  private makeRoom(used: KeyEntry, now: number): void {
    while (this.open.size + this.guarded.size > this.maxKeys || this.bytes > this.maxBytes) {
      if (this.dropOldestIfDead(this.guardedOldest, now) !== undefined) continue
      if (this.dropOldestIfDead(this.openOldest, now) !== undefined) continue
      const victim = this.oldestExcept(this.openOldest, this.open, used) ?? this.oldestExcept(this.guardedOldest, this.guarded, used)
      if (victim !== undefined) {
        this.remove(victim[0], victim[1])
        continue
      }
      // Only `used` is left, and it alone is over maxBytes: it is not kept.
      for (const [key, entry] of this.open.size > 0 ? this.open : this.guarded) this.remove(key, entry)
      return
    }
  }

  // Opportunistic and O(1): the least recently used entry is the likeliest to have expired, so a
  // new key checks it; a store under steady load sheds dead keys without a sweeper timer.
  private dropOldestIfDead(segment: OldestCursor, now: number): KeyEntry | undefined {
    const oldest = segment.first()
    if (oldest === undefined || now < oldest[1].deadAt) return undefined
    this.remove(oldest[0], oldest[1])
    return oldest[1]
  }

  /** The least recently used entry of a segment other than `used` (the first or the second). */
  private oldestExcept(cursor: OldestCursor, segment: Map<string, KeyEntry>, used: KeyEntry): [string, KeyEntry] | undefined {
    const first = cursor.first()
    if (first === undefined || first[1] !== used) return first
    if (segment.size < 2) return undefined
    // Rare (the entry just decided is the oldest of its class and others remain): a walk from the start.
    const order = segment.entries()
    order.next()
    return order.next().value
  }

  private remove(key: string, entry: KeyEntry): void {
    if (entry.protected) this.guarded.delete(key)
    else this.open.delete(key)
    this.bytes -= entry.bytes
    // Tells the OldestCursor that this entry left its place.
    entry.movedAt = -1
  }

  private resize(entry: KeyEntry, delta: number): void {
    entry.bytes += delta
    this.bytes += delta
  }

  /**
   * Maps a request's policies onto the entry's records by (name, algorithm), appending unknown
   * ones and dropping expired records of other sets, and remembers the mapping for the next call.
   */
  private indexFor(entry: KeyEntry, policies: readonly Policy[], now: number): number[] {
    const held = entry.policies.slice()
    for (let at = held.length - 1; at >= 0; at--) {
      const record = entry.records[at]
      if ((record === undefined || now >= record.expiresAt) && findPolicy(policies, held[at]) < 0) {
        held.splice(at, 1)
        entry.records.splice(at, 1)
        if (record !== undefined) this.resize(entry, -recordBytes(record))
      }
    }
    const index: number[] = new Array(policies.length)
    for (let i = 0; i < policies.length; i++) {
      let at = findPolicy(held, policies[i])
      if (at < 0) {
        at = held.length
        held.push(policies[i])
        entry.records.push(undefined)
      }
      index[i] = at
    }
    entry.policies = held
    entry.lastSet = policies
    entry.lastIndex = index
    entry.lastProtectBelow = protectBelowOf(policies)
    return index
  }
}
