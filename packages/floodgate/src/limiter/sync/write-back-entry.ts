// One key held by write-back sync: its local copy, the units not yet in the store, and the local decision with the share rule.

import { ALGORITHM_BY_NAME } from '../../core/algorithms/index.js'
import { copyState, createStepResult } from '../../core/algorithms/types.js'
import { admitOneInto, evaluateKeyInto, type KeyEvaluation, type PolicyRecord } from '../../core/evaluate.js'
import { mergeKey } from '../../core/merge.js'
import type { Policy } from '../../core/policy.js'
import type { WriteBackStats } from './write-back-options.js'

/** Units sent to the store and not yet confirmed, with the seq that makes a resend count once. */
export interface Outbox {
  readonly units: number
  readonly seq: number
}

/**
 * A key (with one policy set) as write-back holds it.
 * - `synced`: the store's records as of the last answer (undefined: never heard from the store).
 * - `local`: `synced` with this instance's units not in it yet (`outbox` and `pending`) merged in:
 *   what decisions read and charge.
 * - `pending`: units admitted (or refunded) since the last flush took them; `outbox`: units sent and
 *   not yet confirmed (sent again, with the same seq, until an answer comes).
 */
export interface Entry {
  readonly key: string
  readonly policies: readonly Policy[]
  readonly flushMs: number
  synced: PolicyRecord[] | undefined
  /** The local clock when the store last answered for this key (-Infinity: never). */
  syncedAt: number
  local: PolicyRecord[]
  pending: number
  outbox: Outbox | undefined
  /** The flush call carrying this key now (0: none). */
  inFlight: number
  /**
   * Units this instance may still admit before the store's answer to the read under way (a key not
   * held before, or with a copy too old); undefined when no such read is under way.
   */
  provisional: number | undefined
  /** Decisions waiting for the key's first (or a stale key's) answer from the store. */
  waiters: (() => void)[] | undefined
  /** Read or charged since the last flush: the next flush refreshes it even with no units to send. */
  touched: boolean
  /** In WriteBack's set of keys for the next flush (kept with it: a flag is cheaper to test than the set). */
  queued: boolean
  /**
   * The last answer held no other instance's units since the one before (or was the first): this
   * instance is the key's only user now, and a spent share may ask the store for the next at once.
   */
  alone: boolean
  /** A decision was denied by the share rule since write-back last looked (WriteBack.answer clears it). */
  shareSpent: boolean
  /** Refreshes asked for by a spent share since the last flush tick (capped: write-back-bounds.ts). */
  early: number
}

export function createEntry(key: string, policies: readonly Policy[]): Entry {
  let flushMs = Infinity
  for (const policy of policies) flushMs = Math.min(flushMs, policy.flushMs)
  return {
    key,
    policies,
    flushMs,
    synced: undefined,
    syncedAt: -Infinity,
    local: policies.map(() => ({ blockedUntil: 0, state: undefined })),
    pending: 0,
    outbox: undefined,
    inFlight: 0,
    provisional: undefined,
    waiters: undefined,
    touched: false,
    queued: false,
    alone: true,
    shareSpent: false,
    early: 0,
  }
}

/** An admission of `cost` at `localNow`: off the provisional units, and the age of the answer it was decided from into `stats`. */
export function tallyAdmit(entry: Entry, cost: number, localNow: number, stats: WriteBackStats): void {
  if (entry.provisional !== undefined) entry.provisional -= cost
  // A key never heard from (syncedAt -Infinity) decides provisional units, which the bound counts apart.
  const age = localNow - entry.syncedAt
  if (age > stats.oldestAnswerMs && age !== Infinity) stats.oldestAnswerMs = age
}

/** Whether dropping the entry loses nothing but a copy: no units to send, nothing in flight, no one waiting. */
export function isClean(entry: Entry): boolean {
  return entry.pending === 0 && entry.outbox === undefined && entry.inFlight === 0 && entry.waiters === undefined
}

/**
 * Takes the store's answer for the key: `synced` becomes it, and `local` becomes it with the units
 * the answer does not hold yet (`unsent`: admitted since the flush was sent) merged back in. A block
 * period started here keeps running.
 */
export function applySynced(entry: Entry, records: PolicyRecord[], now: number, syncedAt: number, confirmed: number): void {
  entry.alone = othersIdle(entry, records, now, confirmed)
  const unsent = entry.pending + (entry.outbox?.units ?? 0)
  const local = mergeKey(
    records,
    now,
    entry.policies.map(() => unsent),
    entry.policies,
  ).records
  for (let i = 0; i < local.length; i++) {
    local[i].blockedUntil = Math.max(local[i].blockedUntil, entry.local[i].blockedUntil)
    // With nothing unsent the merge hands back the answer's own array; decisions rewrite the local
    // one in place, and `synced` must stay as the store answered.
    if (local[i].state === records[i].state) local[i].state = records[i].state?.slice()
  }
  entry.synced = records
  entry.syncedAt = syncedAt
  entry.local = local
}

/**
 * Whether `records` (the store's answer at `now`) hold nothing beyond the last answer but this
 * instance's `confirmed` units: every policy shows at least what the last answer showed remaining,
 * less those units (both read at `now`, so refill counts alike). A first answer counts as idle.
 */
function othersIdle(entry: Entry, records: PolicyRecord[], now: number, confirmed: number): boolean {
  const synced = entry.synced
  if (synced === undefined) return true
  for (let i = 0; i < entry.policies.length; i++) {
    const policy = entry.policies[i]
    const step = ALGORITHM_BY_NAME[policy.algorithm].step
    if (step(records[i].state, now, 0, policy).remaining < step(synced[i].state, now, 0, policy).remaining - confirmed) return false
  }
  return true
}

/**
 * What the last answer showed remaining for the tightest policy, less this instance's units not in it:
 * what the rest of the fleet may still take. A refresh is worth asking for when it is at least N (the
 * next share is then a unit or more).
 */
export function leftForFleet(entry: Entry, now: number): number {
  let left = Infinity
  for (let i = 0; i < entry.policies.length; i++) {
    const policy = entry.policies[i]
    const remaining = ALGORITHM_BY_NAME[policy.algorithm].step(entry.synced?.[i].state, now, 0, policy).remaining
    left = Math.min(left, remaining - entry.pending - (entry.outbox?.units ?? 0))
  }
  return left
}

// Where decideLocally's one-policy admissions step (evaluateKeyInto's buffers are the core's own).
const ownStep = createStepResult()

/**
 * Decides `cost` from the local copy into `out` and, when admitted, charges the local copy and counts
 * the units as pending. With `instances` > 1 an admission must also keep this instance within its
 * share (see shareDenies); a policy that would go past it denies for one flush interval.
 */
export function decideLocally(entry: Entry, now: number, cost: number, instances: number, out: KeyEvaluation): KeyEvaluation {
  const local = entry.local
  // The usual decision (one policy, a charge, no block running, admitted) steps the copy's state
  // alone; evaluateKeyInto's two passes over the set are for the rest.
  const evaluation =
    cost > 0 &&
    local.length === 1 &&
    local[0].blockedUntil <= now &&
    admitOneInto(local[0].state, now, cost, entry.policies[0], out, ownStep)
      ? out
      : evaluateKeyInto(local, now, cost, entry.policies, out)
  if (evaluation.allowed && cost > 0 && instances > 1 && shareDenies(entry, now, cost, instances, evaluation)) {
    // Nothing is charged: the local copy is left as it was.
    entry.shareSpent = true
    return evaluation
  }
  const records = evaluation.records
  for (let i = 0; i < records.length; i++) {
    const next = records[i]
    const own = entry.local[i]
    own.blockedUntil = next.blockedUntil
    // The step's state array is reused by the next evaluation: its numbers go into the entry's own.
    if (next.state === undefined) own.state = undefined
    else if (own.state === undefined || own.state === next.state) own.state = next.state.slice()
    else copyState(own.state, next.state)
  }
  if (evaluation.allowed && cost !== 0) entry.pending += cost
  entry.touched = true
  return evaluation
}

/**
 * The share rule. Every instance decides from a copy that may miss what the others admitted since
 * they last synced; if each spent all that its copy shows remaining, N instances could admit N
 * times it. So an instance stops admitting once its own units not yet in `synced` reach its share,
 * max(1, floor(remaining / N)) of what `synced` shows remaining now: with equal copies the fleet
 * spends at most what remains, and the store's answer every flush hands out the next shares.
 * Rewrites the failing policies' results as denials and answers whether any failed.
 */
function shareDenies(entry: Entry, now: number, cost: number, instances: number, evaluation: KeyEvaluation): boolean {
  let denied = false
  for (let i = 0; i < entry.policies.length; i++) {
    const policy = entry.policies[i]
    const remaining = ALGORITHM_BY_NAME[policy.algorithm].step(entry.synced?.[i].state, now, 0, policy).remaining
    const result = evaluation.results[i]
    // Own units counted against this policy now: what the synced copy has left less what the local one has.
    const own = remaining - result.remaining
    const share = remaining > 0 ? Math.max(1, Math.floor(remaining / instances)) : 0
    if (own - cost < share) continue
    denied = true
    result.allowed = false
    result.remaining = 0
    // The next flush brings the store's answer, and with it the next share.
    result.retryAfterMs = Math.max(1, Math.ceil(entry.flushMs))
  }
  if (denied) evaluation.allowed = false
  return denied
}

// The store's records as the entry's own (a store may reuse what it answers).
export function ownRecords(records: readonly PolicyRecord[]): PolicyRecord[] {
  return records.map((record) => ({ blockedUntil: record.blockedUntil, state: record.state?.slice() }))
}
