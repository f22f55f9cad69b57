// The `auto` sync mode: exact decisions for keys that are cold on this instance, leases for hot ones.

import type { Policy } from '../../core/policy.js'
import type { EvaluateResponse, LeaseStore } from '../../stores/store.js'
import { HeatTable, type HeatOwner } from './heat-table.js'
import { policySetId } from './policy-set.js'
import type { LeaseCallback, LeaseSync } from './lease-sync.js'

export interface AutoSyncOptions {
  store: LeaseStore
  leases: LeaseSync
  /** The same clock as the leases' (ms, forward only); tests inject one. */
  clock?: () => number
  /** Most keys whose heat is followed (default 10 000); the least used cold one is forgotten past it. */
  maxKeys?: number
}

// The keys of one policy set (equal sets share one), each with its slot in the heat table, how
// their heat is read, and what the set decides.
interface HeatSet extends HeatOwner {
  readonly policies: readonly Policy[]
  /** The hot threshold, and the rate below which a hot key is cold again (decisions per ms). */
  readonly hotPerMs: number
  readonly coolPerMs: number
  /** Whether a cold key is decided by the plain exact call. */
  readonly plainExact: boolean
}

// Algorithms whose leases are charged to the state at grant (core/lease.ts), so a plain exact
// decision that reads no ledger already counts every unit held on leases.
const CHARGED_AT_GRANT = new Set(['fixed-window', 'sliding-window'])
// token-bucket and gcra hold units beside the state (the refill cap, the reservation): their cold
// decisions must read the ledgers. A store whose exact call does so when leases are live
// (LeaseStore.exactReadsLedgers: RedisStore) decides them by that call; another, by the lease call
// with no lease (`id` 0).
const HELD_BESIDE_STATE = new Set(['token-bucket', 'gcra'])

// Decisions a key at the hot threshold makes in its rate's time constant (at least 1 s): with 16,
// a rate read at the threshold is within about ±25% of its true value (Poisson noise), so a key at
// half the threshold (uniform lukewarm traffic) does not read as hot, and one above it as cold, by
// chance; with 8 (a 1 s window at the former threshold of 8/s) a lower threshold flapped.
const HEAT_DECISIONS = 16
// A hot key is cold again below this share of the threshold: the gap keeps a key near it from flapping.
const COOL_SHARE = 1 / 2

/** The thresholds and rate window of keys decided under `policies` (see HEAT_DECISIONS). */
export function heatThresholds(policies: readonly Policy[]): Pick<HeatSet, 'hotPerMs' | 'coolPerMs' | 'windowMs' | 'keepPerMs'> {
  const hotPerMs = Math.min(...policies.map((policy) => policy.hotRate)) / 1000
  const windowMs = Math.max(1000, HEAT_DECISIONS / hotPerMs)
  // A key is forgotten for a newer one below a quarter of the threshold read over 1 s, not over its
  // window: a fresh key reads 1/windowMs per decision, so a longer window alone would have the clock
  // hand forget keys before they warm. At the default a key asked twice in a row is kept, as before.
  return { hotPerMs, coolPerMs: hotPerMs * COOL_SHARE, windowMs, keepPerMs: ((hotPerMs / 4) * 1000) / windowMs }
}

/**
 * Moves a key to leases when this instance decides it at `hotRate` a second or more, and back to
 * exact decisions below half that (the gap keeps a key near the threshold from flapping), its rate
 * read over a window in which a key at `hotRate` makes 16 decisions (heatThresholds). Heat is
 * followed for at most `maxKeys` keys over every policy set (HeatTable): past it, the oldest key
 * whose rate is below its set's `keepPerMs` is forgotten (a key that is hot, or warming, goes
 * to the back of the line), and a key forgotten on leases gives its unused units back.
 *
 * A cold key costs what `sync: 'always'` costs: for fixed-window and sliding-window its decision
 * is the plain exact call (`plainExact` tells the backend so), as leases are charged to the same
 * state at grant; for token-bucket and gcra too when the store's exact call reads the ledgers of
 * a key with live leases (RedisStore: its records say when they are live, so a key never leased
 * reads one key). Other cold keys are decided through the lease primitive with no lease (`id` 0),
 * which counts the units other instances hold. Either way the guarantee is the same on both sides
 * of a switch and across it (core/lease.ts; test/core/lease.test.ts mixes both).
 */
export class AutoSync {
  private readonly store: LeaseStore
  private readonly leases: LeaseSync
  private readonly clock: () => number
  // Sets by their id (policySetId), and by array (a plan's, reused for every decision) to skip the id.
  private readonly sets = new Map<string, HeatSet>()
  private readonly byArray = new WeakMap<readonly Policy[], HeatSet>()
  // The last array looked up and its set: a limiter asks for one set nearly always.
  private lastArray: readonly Policy[] | undefined
  private lastSet: HeatSet | undefined
  // Keys followed over every set, with their heat.
  private readonly heat: HeatTable<HeatSet>
  // The key `tryLocal` counted last, its set and slot: one decision asks for its key's slot up to
  // four times (tryLocal, plainExact, enqueue), with the same string, and a Map lookup of a key
  // string is most of what following heat costs. Only `tryLocal` adds keys (and so moves slots), and
  // it rewrites these: between two calls of it the slot stays the key's.
  private warmKey: string | undefined
  private warmSet: HeatSet | undefined
  private warmSlot = -1

  // Whether the store's exact call reads ledgers (LeaseStore.exactReadsLedgers).
  private readonly exactReadsLedgers: boolean

  constructor(options: AutoSyncOptions) {
    this.store = options.store
    this.exactReadsLedgers = options.store.exactReadsLedgers === true
    this.leases = options.leases
    this.clock = options.clock ?? (() => performance.now())
    this.heat = new HeatTable<HeatSet>(options.maxKeys ?? 10_000, (key, set) => this.leases.drop(key, set.policies))
  }

  /** Keys whose heat is followed, and of them those on leases now (walks them: at most `maxKeys`). */
  heatTotals(): { keys: number; hot: number } {
    return { keys: this.heat.size, hot: this.heat.hotCount() }
  }

  /** Whether `key` is on leases now. */
  isHot(key: string, policies: readonly Policy[]): boolean {
    const slot = this.slotOf(key, this.setOf(policies))
    return slot !== undefined && this.heat.isHot(slot)
  }

  /**
   * Whether a decision of `key` that `tryLocal` did not answer is a plain exact store call (the
   * caller makes it, as `sync: 'always'` would), rather than `enqueue`.
   */
  plainExact(key: string, policies: readonly Policy[]): boolean {
    const set = this.setOf(policies)
    if (!set.plainExact) return false
    const slot = this.slotOf(key, set)
    return slot === undefined || !this.heat.isHot(slot)
  }

  /** Decides like LeaseSync.decide: from a lease when the key is hot, else exactly in the store. */
  decide(key: string, policies: readonly Policy[], cost: number, done: LeaseCallback): () => void {
    const local = this.tryLocal(key, policies, cost)
    if (local !== undefined) {
      done(null, local, 'lease')
      return () => {}
    }
    return this.enqueue(key, policies, cost, done)
  }

  /** Counts the decision (heat) and answers it in-process when the key is hot and its lease covers it. */
  tryLocal(key: string, policies: readonly Policy[], cost: number): EvaluateResponse | undefined {
    const now = this.clock()
    const set = this.setOf(policies)
    const heat = this.heat
    // A key the lease engine follows finds its slot through its holding: one lookup of the key
    // string, in the engine's map of the keys on leases, rather than two.
    const holding = this.leases.find(key, policies)
    const slot =
      holding !== undefined && holding.heatSlot >= 0 && heat.stampOf(holding.heatSlot) === holding.heatStamp
        ? holding.heatSlot
        : (set.keys.get(key) ?? heat.add(key, set, now))
    this.warmKey = key
    this.warmSet = set
    this.warmSlot = slot
    const perMs = heat.count(slot, now, set.windowMs)
    const hot = heat.isHot(slot)
    if (!hot) {
      if (perMs < set.hotPerMs) return undefined
      heat.setHot(slot, true)
    } else if (perMs < set.coolPerMs) {
      // Cooled (below half the threshold: the gap keeps a key near it from flapping).
      heat.setHot(slot, false)
      this.leases.drop(key, policies)
      return undefined
    }
    const stamp = heat.stampOf(slot)
    if (holding === undefined || holding.heatStamp !== stamp || !hot) {
      const held = holding ?? this.leases.holding(key, policies, now)
      held.heatSlot = slot
      held.heatStamp = stamp
      // A key turning hot sizes its first lease to the rate its heat was read at: the lease engine
      // counts only hot decisions, and with none yet it would decide this one exactly.
      if (!hot) held.seed(perMs, now)
    }
    return this.leases.tryLocal(key, policies, cost, now)
  }

  /**
   * The store part (after `tryLocal`): the lease engine for a hot key, an exact lease call for a cold
   * one; either carries `deadline` (see LeaseRequest.deadline).
   */
  enqueue(key: string, policies: readonly Policy[], cost: number, done: LeaseCallback, deadline?: number): () => void {
    if (this.isHot(key, policies)) return this.leases.enqueue(key, policies, cost, done, deadline)
    let cancelled = false
    const request = { key, policies, id: 0, want: 0, need: cost, leaseMs: 0, returnId: 0, returnUnused: 0, deadline }
    this.store.lease([request]).then(
      ([answer]) => {
        if (!cancelled) done(null, { allowed: answer.allowed, results: answer.results, now: answer.now }, 'store')
      },
      (error: unknown) => {
        if (!cancelled) done(error)
      },
    )
    return () => {
      cancelled = true
    }
  }

  private slotOf(key: string, set: HeatSet): number | undefined {
    return key === this.warmKey && set === this.warmSet ? this.warmSlot : set.keys.get(key)
  }

  private setOf(policies: readonly Policy[]): HeatSet {
    if (policies === this.lastArray) return this.lastSet!
    let set = this.byArray.get(policies)
    if (set !== undefined) return this.remember(policies, set)
    const id = policySetId(policies)
    set = this.sets.get(id)
    if (set === undefined) {
      set = {
        policies,
        keys: new Map(),
        ...heatThresholds(policies),
        plainExact: policies.every(
          (policy) => CHARGED_AT_GRANT.has(policy.algorithm) || (this.exactReadsLedgers && HELD_BESIDE_STATE.has(policy.algorithm)),
        ),
      }
      this.sets.set(id, set)
    }
    this.byArray.set(policies, set)
    return this.remember(policies, set)
  }

  private remember(policies: readonly Policy[], set: HeatSet): HeatSet {
    this.lastArray = policies
    this.lastSet = set
    return set
  }
}
