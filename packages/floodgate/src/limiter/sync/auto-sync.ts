// The `auto` sync mode: exact decisions for keys that are cold on this instance, leases for hot ones.

import type { Policy } from '../../core/policy.js'
import type { EvaluateResponse, LeaseStore } from '../../stores/store.js'
import { Demand } from './demand.js'
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

// One key's heat: its decisions per ms, and whether it is on leases now.
interface Heat {
  readonly demand: Demand
  hot: boolean
}

// The keys of one policy set (equal sets share one), first use first, with what the set decides.
interface HeatSet {
  readonly policies: readonly Policy[]
  readonly keys: Map<string, Heat>
  /** The hot threshold, in decisions per ms. */
  readonly hotPerMs: number
  /** Whether a cold key is decided by the plain exact call. */
  readonly plainExact: boolean
}

// How many of the oldest followed keys one eviction looks at for a cold one: bounds its cost.
const EVICTION_PROBES = 16

// Algorithms whose leases are charged to the state at grant (core/lease.ts), so a plain exact
// decision (the `always` script, which reads no ledger) already counts every unit held on leases.
// token-bucket and gcra hold units beside the state (the refill cap, the reservation): their cold
// decisions must read the ledgers, through the lease script with no lease (`id` 0).
const CHARGED_AT_GRANT = new Set(['fixed-window', 'sliding-window'])

/**
 * Moves a key to leases when this instance decides it at `hotRate` a second or more, and back to
 * exact decisions below half that (the gap keeps a key near the threshold from flapping). Heat is
 * followed for at most `maxKeys` keys: past it, the oldest key whose rate is below a quarter of
 * `hotRate` is forgotten (a key that is hot, or warming, goes to the back of the line), and a key
 * forgotten on leases gives its unused units back.
 *
 * A cold key costs what `sync: 'always'` costs: for fixed-window and sliding-window its decision
 * is the plain exact call (`plainExact` tells the backend so), as leases are charged to the same
 * state at grant. Other algorithms decide cold keys through the lease primitive with no lease
 * (`id` 0), which counts the units other instances hold. Either way the guarantee is the same on
 * both sides of a switch and across it (core/lease.ts; test/core/lease.test.ts mixes both).
 */
export class AutoSync {
  private readonly store: LeaseStore
  private readonly leases: LeaseSync
  private readonly clock: () => number
  private readonly maxKeys: number
  // Sets by their id (policySetId), and by array (a plan's, reused for every decision) to skip the id.
  private readonly sets = new Map<string, HeatSet>()
  private readonly byArray = new WeakMap<readonly Policy[], HeatSet>()
  // Keys followed over every set.
  private size = 0

  constructor(options: AutoSyncOptions) {
    this.store = options.store
    this.leases = options.leases
    this.clock = options.clock ?? (() => performance.now())
    this.maxKeys = options.maxKeys ?? 10_000
  }

  /** Keys whose heat is followed, and of them those on leases now (walks them: at most `maxKeys`). */
  heatTotals(): { keys: number; hot: number } {
    let hot = 0
    for (const set of this.sets.values()) for (const heat of set.keys.values()) if (heat.hot) hot++
    return { keys: this.size, hot }
  }

  /** Whether `key` is on leases now. */
  isHot(key: string, policies: readonly Policy[]): boolean {
    return this.setOf(policies).keys.get(key)?.hot ?? false
  }

  /**
   * Whether a decision of `key` that `tryLocal` did not answer is a plain exact store call (the
   * caller makes it, as `sync: 'always'` would), rather than `enqueue`.
   */
  plainExact(key: string, policies: readonly Policy[]): boolean {
    const set = this.setOf(policies)
    return set.plainExact && set.keys.get(key)?.hot !== true
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
    return this.warm(key, policies) ? this.leases.tryLocal(key, policies, cost) : undefined
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

  // Counts the decision and answers whether the key is hot, switching it (and giving back its
  // lease when it cools).
  private warm(key: string, policies: readonly Policy[]): boolean {
    const now = this.clock()
    const set = this.setOf(policies)
    let heat = set.keys.get(key)
    if (heat === undefined) {
      if (this.size >= this.maxKeys) this.forgetOne(set.keys.size > 0 ? set : this.largestSet(), now)
      heat = { demand: new Demand(1000), hot: false }
      set.keys.set(key, heat)
      this.size++
    }
    const perMs = heat.demand.add(1, now)
    const hotPerMs = set.hotPerMs
    if (!heat.hot && perMs >= hotPerMs) heat.hot = true
    else if (heat.hot && perMs < hotPerMs / 2) {
      heat.hot = false
      this.leases.drop(key, policies)
    }
    return heat.hot
  }

  // Forgets one key: the oldest of the first few whose rate is below a quarter of its threshold;
  // hot and warming keys among them go to the back (Map order), so a flood of one-off keys never
  // pushes out a hot one. When all probed are that warm, the first goes anyway (memory is bounded),
  // and a key forgotten on leases gives its unused units back.
  private forgetOne(set: HeatSet, now: number): void {
    const keys = set.keys
    let probes = 0
    for (const [key, heat] of keys) {
      if (probes++ >= EVICTION_PROBES) break
      if (heat.demand.perMs(now) < set.hotPerMs / 4) return this.forget(set, key, heat)
      keys.delete(key)
      keys.set(key, heat)
    }
    const first = keys.entries().next()
    if (first.done !== true) this.forget(set, first.value[0], first.value[1])
  }

  private forget(set: HeatSet, key: string, heat: Heat): void {
    set.keys.delete(key)
    this.size--
    if (heat.hot) this.leases.drop(key, set.policies)
  }

  // The set holding the most keys (a new set's first key, with the cap reached by others).
  private largestSet(): HeatSet {
    let largest: HeatSet | undefined
    for (const set of this.sets.values()) if (largest === undefined || set.keys.size > largest.keys.size) largest = set
    return largest!
  }

  private setOf(policies: readonly Policy[]): HeatSet {
    let set = this.byArray.get(policies)
    if (set !== undefined) return set
    const id = policySetId(policies)
    set = this.sets.get(id)
    if (set === undefined) {
      set = {
        policies,
        keys: new Map(),
        hotPerMs: Math.min(...policies.map((policy) => policy.hotRate)) / 1000,
        plainExact: policies.every((policy) => CHARGED_AT_GRANT.has(policy.algorithm)),
      }
      this.sets.set(id, set)
    }
    this.byArray.set(policies, set)
    return set
  }
}
