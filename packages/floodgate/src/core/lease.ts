// Leases: taking and returning blocks of units for one key, per algorithm, as pure arithmetic;
// mirrored line by line by src/stores/redis/scripts/lease.lua. Both stores call this, nothing else does.
//
// A lease is a block of `units` that one instance admits from locally until `expiresAt`. Every
// policy of the key keeps, beside its state, a ledger of the leases live on it:
// `[id1, expiresAt1, units1, id2, …]`, earliest expiry first, at most MAX_LEASES. Why the sum of
// what all instances admit never exceeds the limit (docs/sync.md has the proofs):
// - fixed-window, sliding-window, concurrency (`charged`): a grant charges the block to the state
//   at once, like a request of cost `units`, and the lease ends by the window's end (the slots'
//   expiry). A return refunds the unused units while the lease is live, so the count never falls
//   below what was admitted.
// - token-bucket (`charged` and `held`): the grant takes the units from the bucket, and while a
//   lease is live the bucket refills only up to `burst - held` (held: the units of live leases).
//   So the bucket plus every unspent block never holds more than `burst`, and refills at `limit`
//   per period: over any interval, admitted ≤ burst + rate × interval, as for one bucket.
// - gcra (`reserved`): a grant reserves the units (`held`, the tolerance shrinks by them) and
//   charges nothing; a return charges what was spent, an expiry charges the whole block. The same
//   sum (the allowance plus the unspent blocks) never exceeds `burst`.
// Expiries are applied in order at their own time (the state advanced to it first), because a
// bucket must not be refilled up to a cap that was not yet free.

import { ALGORITHM_BY_NAME } from './algorithms/index.js'
import { createStepResult, type State, type StepResult } from './algorithms/types.js'
import type { PolicyRecord, PolicyResult } from './evaluate.js'
import type { Policy } from './policy.js'

/** The live leases of one (key, policy): `[id, expiresAt, units, …]`, earliest expiry first. */
export type Ledger = number[]

/** Most leases live on one (key, policy): a bound on its ledger, whatever the number of instances. */
export const MAX_LEASES = 64

/** What one lease call asks of one key. */
export interface LeaseAsk {
  /**
   * Id of the lease to take (unique across instances, a whole number below 2^53), or 0 to decide
   * `need` exactly and keep no lease (the cold path of `auto`, and a denial's re-check).
   */
  id: number
  /** Units wanted (the lease's size), at least `need`; the grant may be smaller, down to `need`. */
  want: number
  /**
   * The cost of the request in hand: the grant is 0 unless it is at least this. 0 with `id` 0 peeks;
   * below 0 (with `id` 0) refunds, exactly.
   */
  need: number
  /** The longest the lease may live, in ms. */
  leaseMs: number
  /** A lease of the caller's to end in the same call (0: none); ending one twice does nothing. */
  returnId: number
  /** Its units the caller did not admit (they go back to the key). */
  returnUnused: number
}

/** What a lease call answers for one key. */
export interface LeaseEvaluation {
  /** Units granted: 0, or at least `need` (then the request in hand is admitted from them). */
  granted: number
  /** When the lease ends, on the store's clock (0 without a lease). */
  expiresAt: number
  /** Whether `returnId` was live and has now ended (false: unknown, expired or already ended). */
  returned: boolean
  /** Whether the request in hand (`need`) was admitted. */
  allowed: boolean
  /** Per policy, the request in hand's outcome: on a grant, what the key has left after it. */
  results: PolicyResult[]
  /** The records to store: one state record per policy, then one ledger record per policy. */
  records: PolicyRecord[]
  /** How long each record must be kept (ms, ≥ 1), as `records`. */
  ttlMs: number[]
}

type Kind = 'charged' | 'reserved'

/** How each algorithm a lease may hold accounts for it (docs/sync.md); others are refused by core/sync.ts. */
export const LEASE_KIND: Readonly<Partial<Record<Policy['algorithm'], Kind>>> = Object.freeze({
  'fixed-window': 'charged',
  'sliding-window': 'charged',
  concurrency: 'charged',
  'token-bucket': 'charged',
  gcra: 'reserved',
})

/**
 * Ends `ask.returnId`, then grants a lease of up to `ask.want` units (all policies alike, as the
 * smallest of what each can spare and of a fair share) or decides `ask.need` exactly when
 * `ask.id` is 0. Records and ledgers are only read; the answer is new.
 */
export function leaseKey(
  records: readonly (PolicyRecord | undefined)[],
  ledgers: readonly (Ledger | undefined)[],
  now: number,
  ask: LeaseAsk,
  policies: readonly Policy[],
): LeaseEvaluation {
  const states: (State | undefined)[] = []
  const lives: Ledger[] = []
  const held: number[] = []
  let returned = false
  let full = false
  for (let i = 0; i < policies.length; i++) {
    const policy = policies[i]
    let state = records[i]?.state
    const ledger: Ledger = []
    let units = 0
    // Expired leases end first, in order, each at its own time.
    const old = ledgers[i] ?? []
    for (let at = 0; at < old.length; at += 3) {
      if (old[at + 1] > now) {
        ledger.push(old[at], old[at + 1], old[at + 2])
        units = units + old[at + 2]
      }
    }
    for (let at = 0; at < old.length; at += 3) {
      if (old[at + 1] <= now) {
        state = ended(state, old[at + 1], old[at + 2], 0, units + ledgerUnitsAfter(old, at, now), policy)
      }
    }
    // The caller's previous lease ends now, its unused units back.
    if (ask.returnId !== 0) {
      for (let at = 0; at < ledger.length; at += 3) {
        if (ledger[at] === ask.returnId) {
          const leased = ledger[at + 2]
          state = ended(state, now, leased, Math.min(ask.returnUnused, leased), units, policy)
          units = units - leased
          ledger.splice(at, 3)
          returned = true
          break
        }
      }
    }
    if (ledger.length >= MAX_LEASES * 3) full = true
    states.push(state)
    lives.push(ledger)
    held.push(units)
  }

  // A lease: what every policy can spare now, within a fair share (no instance takes more than
  // capacity / (holders + 1)) but at least the request in hand. Without one (id 0, or a full
  // ledger): the request in hand alone, decided exactly.
  const keep = ask.id !== 0 && !full
  let grant = 0
  let allowed = true
  if (ask.need > 0 || keep) {
    grant = keep ? ask.want : ask.need
    for (let i = 0; i < policies.length; i++) {
      const policy = policies[i]
      const spare = step(states[i], now, 0, policy, held[i], peek).remaining
      const share = Math.max(1, Math.floor(leaseCapacity(policy) / (lives[i].length / 3 + 1)))
      grant = Math.min(grant, spare, Math.max(ask.need, share))
    }
    allowed = grant >= ask.need
    if (!allowed) grant = 0
  }

  const results: PolicyResult[] = []
  const out: PolicyRecord[] = []
  const ttlMs: number[] = []
  let expiresAt = 0
  if (grant > 0 && keep) {
    expiresAt = now + ask.leaseMs
    for (const policy of policies) expiresAt = Math.min(expiresAt, leaseEnd(policy, now))
  }
  for (let i = 0; i < policies.length; i++) {
    const policy = policies[i]
    let state = states[i]
    if (grant > 0) {
      if (LEASE_KIND[policy.algorithm] === 'charged' || !keep) state = step(state, now, grant, policy, held[i]).state
      if (keep) {
        insertLease(lives[i], ask.id, expiresAt, grant)
        held[i] = held[i] + grant
      }
    } else if (ask.need < 0 && !keep) {
      // A refund decided exactly: the cap of units out on leases applies to it as to refills.
      state = step(state, now, ask.need, policy, held[i]).state
    }
    // The outcome for the request in hand: on a grant, what is left; on a denial, its own step
    // where this policy denies it, else what is left (as evaluateKey re-reads with a peek).
    let result = step(state, now, allowed ? 0 : ask.need, policy, held[i], peek)
    if (!allowed && result.allowed) result = step(state, now, 0, policy, held[i], peek)
    const denied = !allowed && !result.allowed
    let retryAfterMs = result.retryAfterMs
    // Units held by leases come back by their return or expiry at the latest: never "no wait".
    if (denied && held[i] > 0) retryAfterMs = Math.max(retryAfterMs, 1)
    results.push({
      allowed: !denied,
      remaining: result.remaining,
      resetMs: result.resetMs,
      retryAfterMs: denied ? retryAfterMs : 0,
      delayMs: 0,
      blocked: false,
    })
    out.push({ blockedUntil: records[i]?.blockedUntil ?? 0, state })
    // Expiries are applied at their own time, to the state as it was then: it must outlive them.
    const kept = state === undefined ? 1 : ALGORITHM_BY_NAME[policy.algorithm].ttlMs(state, now, policy)
    ttlMs.push(Math.max(kept, ledgerTtl(lives[i], now, policy)))
  }
  for (let i = 0; i < policies.length; i++) {
    const ledger = lives[i]
    out.push({ blockedUntil: 0, state: ledger.length > 0 ? ledger : undefined })
    ttlMs.push(ledgerTtl(ledger, now, policies[i]))
  }
  return { granted: grant, expiresAt, returned, allowed, results, records: out, ttlMs }
}

/** What a fresh key may spend at once: the most one lease could ever be. */
export function leaseCapacity(policy: Policy): number {
  return policy.algorithm === 'token-bucket' || policy.algorithm === 'gcra' ? policy.burst : Math.max(1, policy.limit)
}

/** The latest a lease taken at `now` may live for this policy: a window's end, the slots' expiry. */
function leaseEnd(policy: Policy, now: number): number {
  if (policy.algorithm === 'fixed-window' || policy.algorithm === 'sliding-window') {
    return Math.floor(now / policy.periodMs) * policy.periodMs + policy.periodMs
  }
  if (policy.algorithm === 'concurrency') return now + policy.periodMs
  return Infinity
}

/**
 * The algorithm's step with `held` units out on leases: token-bucket refills only up to `burst -
 * held`, gcra tolerates `burst - held`; the counters count leased units in their state already.
 * With `out`, the result is written into it (see AlgorithmStep).
 */
function step(state: State | undefined, now: number, cost: number, policy: Policy, held: number, out?: StepResult): StepResult {
  return ALGORITHM_BY_NAME[policy.algorithm].step(state, now, cost, held > 0 ? heldPolicy(policy, held) : policy, out)
}

// The result leaseKey's peeks write into, whose numbers are read before the next step: a step's
// result is two allocations, and Redis's Lua (lease.lua's twin of this) pays dearly for each.
const peek = createStepResult()

/**
 * The state after a lease of `leased` units ends at `at` with `unused` of them coming back;
 * `held` counts it. Counters refund the unused units (only while the lease is live: after its
 * window they were never spent in a later one); token-bucket is first advanced to `at` under its
 * old cap, then refunded; gcra charges the units that were spent.
 */
function ended(state: State | undefined, at: number, leased: number, unused: number, held: number, policy: Policy): State | undefined {
  const algorithm = ALGORITHM_BY_NAME[policy.algorithm]
  if (LEASE_KIND[policy.algorithm] === 'reserved') {
    const spent = leased - unused
    return spent > 0 ? algorithm.step(state, at, spent, unboundedPolicy(policy)).state : state
  }
  if (policy.algorithm === 'token-bucket') {
    const advanced = step(state, at, 0, policy, held).state
    return unused > 0 ? step(advanced, at, -unused, policy, held - leased).state : advanced
  }
  if (unused <= 0 || state === undefined) return state
  // A sliding window's refund would come off the previous window once this one's count is spent.
  const refund = policy.algorithm === 'sliding-window' ? Math.min(unused, state[0] === windowOf(at, policy) ? state[1] : 0) : unused
  return refund > 0 ? algorithm.step(state, at, -refund, policy).state : state
}

function windowOf(now: number, policy: Policy): number {
  return Math.floor(now / policy.periodMs) * policy.periodMs
}

// Units of the leases of `old` still live at `now` or expiring after the one at `at` (both held then).
function ledgerUnitsAfter(old: Ledger, at: number, now: number): number {
  let units = 0
  for (let j = 0; j < old.length; j += 3) {
    if (old[j + 1] <= now && (old[j + 1] > old[at + 1] || (old[j + 1] === old[at + 1] && j >= at))) units = units + old[j + 2]
  }
  return units
}

/**
 * How long a ledger outlives its last lease's expiry. An expiry is applied when the key is next
 * read; the bucket's was not yet free before it (token-bucket) and the spent units are charged at
 * it (gcra), which matter until a whole burst would have refilled. Counters need nothing at expiry;
 * the 1 ms keeps the ledger readable at the expiry itself.
 */
function settleMs(policy: Policy): number {
  if (policy.algorithm === 'token-bucket' || policy.algorithm === 'gcra')
    return Math.ceil((policy.burst * policy.periodMs) / policy.limit) + 1
  return 1
}

function ledgerTtl(ledger: Ledger, now: number, policy: Policy): number {
  return ledger.length > 0 ? Math.max(1, lastExpiry(ledger) - now + settleMs(policy)) : 1
}

function insertLease(ledger: Ledger, id: number, expiresAt: number, units: number): void {
  let at = 0
  while (at < ledger.length && ledger[at + 1] <= expiresAt) at += 3
  ledger.splice(at, 0, id, expiresAt, units)
}

function lastExpiry(ledger: Ledger): number {
  return ledger[ledger.length - 2]
}

const heldPolicies = new WeakMap<Policy, Map<number, Policy>>()

/** The policy with `held` units of its burst out on leases (cached: the steps key nothing on identity, but allocation adds up). */
function heldPolicy(policy: Policy, held: number): Policy {
  let byHeld = heldPolicies.get(policy)
  if (byHeld === undefined) {
    byHeld = new Map()
    heldPolicies.set(policy, byHeld)
  }
  let shrunk = byHeld.get(held)
  if (shrunk === undefined) {
    if (byHeld.size > 256) byHeld.clear()
    shrunk = Object.freeze({ ...policy, burst: policy.burst - held })
    byHeld.set(held, shrunk)
  }
  return shrunk
}

const unbounded = new WeakMap<Policy, Policy>()

/** The policy without a tolerance: a step charges whatever it is given (a reserved lease's units were admitted). */
function unboundedPolicy(policy: Policy): Policy {
  let open = unbounded.get(policy)
  if (open === undefined) {
    open = Object.freeze({ ...policy, burst: Infinity })
    unbounded.set(policy, open)
  }
  return open
}
