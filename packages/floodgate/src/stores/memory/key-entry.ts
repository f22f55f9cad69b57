// What the embedded store keeps per key (entries and records), what they count for against maxBytes,
// and the small helpers the store uses on them.

import { ALGORITHM_BY_NAME } from '../../core/algorithms/index.js'
import { copyState, type State } from '../../core/algorithms/types.js'
import type { PolicyRecord } from '../../core/evaluate.js'
import type { Policy } from '../../core/policy.js'

/**
 * Everything kept for one user key. Records are stored per (policy name, algorithm), like the
 * Redis key layout, so two policy sets that share a policy share its state. `policies[i]` owns
 * `records[i]`.
 */
export interface KeyEntry {
  /** The request's own array until another set arrives (copied before any change: copy on write). */
  policies: readonly Policy[]
  records: (StoredRecord | undefined)[]
  /** The latest expiry of any record: past it the whole entry is dead and may be dropped first. */
  deadAt: number
  /** The request set seen last and where each of its policies lives in `policies`; repeat calls skip the name lookup. */
  lastSet: readonly Policy[] | undefined
  lastIndex: readonly number[]
  /** Per policy of `lastSet`, the remaining units below which the key is protected (see protectBelowOf). */
  lastProtectBelow: readonly number[]
  /** The store's move counter when this entry last moved to the young end of the LRU order (-1 once removed). */
  movedAt: number
  /** In the protected class (see MemoryStoreOptions.maxKeys): denied last, or past half a policy's capacity. */
  protected: boolean
  /** What the entry counts for against maxBytes (see MemoryStoreOptions.maxBytes). */
  bytes: number
}

/** A record as the store keeps it: updated in place, with its expiry beside it (one object to reach, not two). */
export interface StoredRecord extends PolicyRecord {
  /**
   * Lazy expiry, the rule the Redis equivalence test mirrors: a record read at `now >= expiresAt`
   * is treated as absent (Redis PEXPIRE drops a key at exactly that moment), and no timer runs.
   */
  expiresAt: number
  /**
   * Merges only (Store.merge): per origin, the last seq applied to this record, so that a replayed
   * request counts once. Kept as long as the record; at most MAX_ORIGINS origins.
   */
  seen?: Map<string, number>
}

/**
 * The most origins a record remembers. Past it the record forgets them all and starts again, as
 * merge.lua does: a replay then counts again, which takes more origins writing one key within one
 * retry than any deployment has instances or regions.
 */
export const MAX_ORIGINS = 64

/** Whether `record` (live) has already applied `seq` from `origin`. */
export function seenBefore(record: StoredRecord | undefined, origin: string, seq: number): boolean {
  const last = record?.seen?.get(origin)
  return last !== undefined && seq <= last
}

/** Remembers that `record` applied `seq` from `origin`. */
export function markSeen(record: StoredRecord, origin: string, seq: number): void {
  const seen = (record.seen ??= new Map())
  if (seen.size >= MAX_ORIGINS && !seen.has(origin)) seen.clear()
  seen.set(origin, seq)
}

// The accounting behind maxBytes, near what V8 uses for an entry (the Map slot, the entry, its records
// array) and for a record (the object and its state array's header): an estimate, cheap to keep.
export const ENTRY_BYTES = 240
const RECORD_BYTES = 80
export const BYTES_PER_CHARACTER = 2
export const BYTES_PER_STATE_NUMBER = 8

/** What a record holding `record.state` counts for against maxBytes. */
export function recordBytes(record: PolicyRecord): number {
  return RECORD_BYTES + (record.state === undefined ? 0 : record.state.length * BYTES_PER_STATE_NUMBER)
}

// Per policy, the remaining units below which a key has used more than half of what it may spend:
// a fresh key's capacity is asked of the algorithm itself (its peek: burst for buckets, limit for
// windows); a counter whose limit is compared outside the store is judged by its nominalLimit.
// Once per policy set: keys are created far more often than sets.
const PROTECT_BELOW = new WeakMap<readonly Policy[], readonly number[]>()
export function protectBelowOf(policies: readonly Policy[]): readonly number[] {
  let thresholds = PROTECT_BELOW.get(policies)
  if (thresholds === undefined) {
    thresholds = policies.map((policy) => {
      const capacity = ALGORITHM_BY_NAME[policy.algorithm].step(undefined, 0, 0, policy).remaining
      return capacity - (policy.nominalLimit ?? capacity) / 2
    })
    PROTECT_BELOW.set(policies, thresholds)
  }
  return thresholds
}

/** `held` made equal to `next` in place (a new array when none is held); `next` itself when it is already the held one. */
export function ownState(held: State | undefined, next: State | undefined): State | undefined {
  if (next === undefined || next === held) return next
  if (held === undefined) return next.slice()
  copyState(held, next)
  return held
}

// [0, 1, …, n - 1]: where a new entry's records live, shared by every entry (never modified).
const IDENTITY: number[][] = []
export function identityIndex(length: number): number[] {
  let index = IDENTITY[length]
  if (index === undefined) {
    index = Array.from({ length }, (_, i) => i)
    IDENTITY[length] = index
  }
  return index
}

/** Where a policy's record lives: same name, algorithm and (leaky-bucket) form, as the Redis key has them. */
export function findPolicy(policies: readonly Policy[], policy: Policy): number {
  for (let i = 0; i < policies.length; i++) {
    const other = policies[i]
    if (other.name === policy.name && other.algorithm === policy.algorithm && other.shaping === policy.shaping) return i
  }
  return -1
}
