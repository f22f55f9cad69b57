// The embedded store: every key's policy records in process memory, bounded by LRU eviction,
// decided by the same evaluateKey that the Redis runner mirrors.

import { createEvaluation, evaluateKeyInto, type KeyEvaluation, type PolicyRecord, type PolicyResult } from '../../core/evaluate.js'
import { copyState, type State } from '../../core/algorithms/types.js'
import { FloodgateError } from '../../core/errors.js'
import type { Policy } from '../../core/policy.js'
import type { EvaluateRequest, EvaluateResponse, Store } from '../store.js'

export interface MemoryStoreOptions {
  /**
   * Most keys kept at once (default 100 000). Past it the least recently used key is dropped,
   * so a flood of unique keys (random IPv6 addresses) cannot grow the process without bound.
   * The order is LRU to within half the store: a key is dropped only after at least maxKeys/2 - 1
   * other keys were added or moved since its last use. A dropped key starts fresh when it comes
   * back: it is forgiven, never wrongly punished.
   */
  maxKeys?: number
  /** Milliseconds since the epoch when a request carries no `now` (default `Date.now`); tests inject one. */
  clock?: () => number
}

/**
 * Everything kept for one user key. Records are stored per (policy name, algorithm), like the
 * Redis key layout, so two policy sets that share a policy share its state. `policies[i]` owns
 * `records[i]`.
 */
interface KeyEntry {
  /** The request's own array until another set arrives (copied before any change: copy on write). */
  policies: readonly Policy[]
  records: (StoredRecord | undefined)[]
  /** The latest expiry of any record: past it the whole entry is dead and may be dropped first. */
  deadAt: number
  /** The request set seen last and where each of its policies lives in `policies`; repeat calls skip the name lookup. */
  lastSet: readonly Policy[] | undefined
  lastIndex: readonly number[]
  /** The store's move counter when this entry last moved to the young end of the LRU order. */
  movedAt: number
}

/** A record as the store keeps it: updated in place, with its expiry beside it (one object to reach, not two). */
interface StoredRecord extends PolicyRecord {
  /**
   * Lazy expiry, the rule the Redis equivalence test mirrors: a record read at `now >= expiresAt`
   * is treated as absent (Redis PEXPIRE drops a key at exactly that moment), and no timer runs.
   */
  expiresAt: number
}

/**
 * An in-process `Store`: no I/O, no timers, answers synchronously (wrapped in resolved promises
 * for the interface). The limiter recognises it and calls `evaluateInto` directly, skipping the
 * promise, the timeout and the circuit breaker, none of which can matter in-process.
 */
export class MemoryStore implements Store {
  readonly maxKeys: number
  private readonly clock: () => number
  // A Map iterates in insertion order, so deleting and re-inserting a key on a touch makes the first
  // key the least recently used one: an O(1) LRU without a linked list. Moving costs a delete and an
  // insert (several times a lookup), so an entry moves only when more than maxKeys/2 moves happened
  // since its last one: a key used within the last maxKeys/2 distinct keys' moves is never the
  // oldest, and a hot working set smaller than that never moves at all.
  private readonly entries = new Map<string, KeyEntry>()
  private readonly moveDistance: number
  private moves = 0
  // evaluateKeyInto reads the records and keeps no reference, so one scratch array serves every call.
  private readonly scratch: (PolicyRecord | undefined)[] = []
  // What evaluateOne decides into before copying the answer out.
  private readonly evaluation = createEvaluation()

  constructor(options: MemoryStoreOptions = {}) {
    if (options === null || typeof options !== 'object') {
      throw new FloodgateError('INVALID_OPTION', 'MemoryStore options: expected an object like { maxKeys: 100000 }')
    }
    const maxKeys = options.maxKeys ?? 100_000
    if (typeof maxKeys !== 'number' || !Number.isInteger(maxKeys) || maxKeys < 1) {
      throw new FloodgateError('INVALID_OPTION', `maxKeys: must be a whole number ≥ 1, got ${JSON.stringify(maxKeys)}`)
    }
    if (options.clock !== undefined && typeof options.clock !== 'function') {
      throw new FloodgateError('INVALID_OPTION', 'clock: must be a function returning milliseconds since the epoch')
    }
    this.maxKeys = maxKeys
    this.moveDistance = maxKeys >>> 1
    this.clock = options.clock ?? Date.now
  }

  /** How many keys are held now (expired ones included until they are touched or evicted). */
  get size(): number {
    return this.entries.size
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
   * Decides one request synchronously. Same meaning as one element of `evaluate`; `now` defaults
   * to the store's clock. The answer is the caller's to keep.
   */
  evaluateOne(key: string, policies: readonly Policy[], cost: number, now: number = this.clock()): EvaluateResponse {
    const evaluation = this.evaluateInto(key, policies, cost, this.evaluation, now)
    const results: PolicyResult[] = new Array(evaluation.results.length)
    for (let i = 0; i < results.length; i++) results[i] = { ...evaluation.results[i] }
    return { allowed: evaluation.allowed, results, now }
  }

  /**
   * The hot path of the embedded limiter: decides one request into `out` (see `evaluateKeyInto`:
   * valid until the next call with the same `out`) and stores the outcome, allocating nothing but
   * the algorithms' new states. `now` defaults to the store's clock.
   */
  evaluateInto(key: string, policies: readonly Policy[], cost: number, out: KeyEvaluation, now: number = this.clock()): KeyEvaluation {
    const entries = this.entries
    const entry = entries.get(key)
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
      if (this.moves - entry.movedAt > this.moveDistance) {
        entries.delete(key)
        entries.set(key, entry)
        entry.movedAt = ++this.moves
      }
      this.save(entry, index!, evaluation.records, evaluation.ttlMs, now)
    } else if (cost > 0) {
      // A peek or a refund of an unknown key leaves nothing worth keeping: its state is fresh.
      this.insert(key, policies, evaluation.records, evaluation.ttlMs, now)
    }
    return evaluation
  }

  /** Forgets the key's records of these policies (matched by name and algorithm); the key goes when none is left. */
  reset(key: string, policies: readonly Policy[]): Promise<void> {
    const entry = this.entries.get(key)
    if (entry !== undefined) {
      for (const policy of policies) {
        const at = findPolicy(entry.policies, policy)
        if (at >= 0) {
          entry.records[at] = undefined
        }
      }
      if (entry.records.every((record) => record === undefined)) this.entries.delete(key)
    }
    return Promise.resolve()
  }

  /** Forgets every key: nothing else to release, the store owns no timers or connections. */
  close(): Promise<void> {
    this.entries.clear()
    return Promise.resolve()
  }

  // The evaluation's records and new states are reused by the next call: their numbers are copied
  // into the entry's own record objects and state arrays, which are updated in place (no garbage,
  // and no young objects for the collector to copy because the store keeps them).
  private save(entry: KeyEntry, index: readonly number[], records: readonly PolicyRecord[], ttlMs: readonly number[], now: number): void {
    let deadAt = entry.deadAt
    for (let i = 0; i < index.length; i++) {
      const at = index[i]
      const expiresAt = now + ttlMs[i]
      const next = records[i]
      const record = entry.records[at]
      if (record === undefined) {
        entry.records[at] = { blockedUntil: next.blockedUntil, state: ownState(undefined, next.state), expiresAt }
      } else {
        record.blockedUntil = next.blockedUntil
        record.state = ownState(record.state, next.state)
        record.expiresAt = expiresAt
      }
      if (expiresAt > deadAt) deadAt = expiresAt
    }
    entry.deadAt = deadAt
  }

  private insert(key: string, policies: readonly Policy[], records: readonly PolicyRecord[], ttlMs: readonly number[], now: number): void {
    const entries = this.entries
    const own: StoredRecord[] = new Array(records.length)
    let deadAt = 0
    for (let i = 0; i < ttlMs.length; i++) {
      const expiresAt = now + ttlMs[i]
      own[i] = { blockedUntil: records[i].blockedUntil, state: ownState(undefined, records[i].state), expiresAt }
      if (expiresAt > deadAt) deadAt = expiresAt
    }
    entries.set(key, { policies, records: own, deadAt, lastSet: policies, lastIndex: identityIndex(policies.length), movedAt: ++this.moves })
    if (entries.size > this.maxKeys) {
      this.evictOldest()
    } else {
      this.dropOldestIfDead(now)
    }
  }

  private evictOldest(): void {
    const oldest = this.entries.keys().next()
    if (!oldest.done) this.entries.delete(oldest.value)
  }

  // Opportunistic and O(1): the least recently used entry is the likeliest to have expired, so a
  // new key checks it; a store under steady load sheds dead keys without a sweeper timer.
  private dropOldestIfDead(now: number): void {
    const oldest = this.entries.entries().next()
    if (!oldest.done && now >= oldest.value[1].deadAt) this.entries.delete(oldest.value[0])
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
    return index
  }
}

/** `held` made equal to `next` in place (a new array when none is held); `next` itself when it is already the held one. */
function ownState(held: State | undefined, next: State | undefined): State | undefined {
  if (next === undefined || next === held) return next
  if (held === undefined) return next.slice()
  copyState(held, next)
  return held
}

// [0, 1, …, n - 1]: where a new entry's records live, shared by every entry (never modified).
const IDENTITY: number[][] = []
function identityIndex(length: number): number[] {
  let index = IDENTITY[length]
  if (index === undefined) {
    index = Array.from({ length }, (_, i) => i)
    IDENTITY[length] = index
  }
  return index
}

/** Where a policy's record lives: same name, algorithm and (leaky-bucket) form, as the Redis key has them. */
function findPolicy(policies: readonly Policy[], policy: Policy): number {
  for (let i = 0; i < policies.length; i++) {
    const other = policies[i]
    if (other.name === policy.name && other.algorithm === policy.algorithm && other.shaping === policy.shaping) return i
  }
  return -1
}
