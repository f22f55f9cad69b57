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
  /** Most keys whose heat is followed (default 10 000); the oldest is forgotten past it. */
  maxKeys?: number
}

// One key's heat: its decisions per ms, and whether it is on leases now.
interface Heat {
  readonly demand: Demand
  hot: boolean
}

/**
 * Moves a key to leases when this instance decides it more than `hotRate` times a second, and back
 * to exact decisions below half that (the gap keeps a key near the threshold from flapping).
 * Exact decisions go through the store's lease primitive with no lease (`id` 0), so they count
 * the units other instances hold on leases: the guarantee is the same on both sides of a switch
 * and across it (core/lease.ts; test/core/lease.test.ts mixes both).
 */
export class AutoSync {
  private readonly store: LeaseStore
  private readonly leases: LeaseSync
  private readonly clock: () => number
  private readonly maxKeys: number
  private readonly heat = new Map<string, Heat>()

  constructor(options: AutoSyncOptions) {
    this.store = options.store
    this.leases = options.leases
    this.clock = options.clock ?? (() => performance.now())
    this.maxKeys = options.maxKeys ?? 10_000
  }

  /** Keys whose heat is followed, and of them those on leases now (walks them: at most `maxKeys`). */
  heatTotals(): { keys: number; hot: number } {
    let hot = 0
    for (const heat of this.heat.values()) if (heat.hot) hot++
    return { keys: this.heat.size, hot }
  }

  /** Whether `key` is on leases now. */
  isHot(key: string, policies: readonly Policy[]): boolean {
    return this.heat.get(this.heatKey(key, policies))?.hot ?? false
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
    const name = this.heatKey(key, policies)
    let heat = this.heat.get(name)
    if (heat === undefined) {
      if (this.heat.size >= this.maxKeys) this.forgetOne()
      heat = { demand: new Demand(1000), hot: false }
      this.heat.set(name, heat)
    }
    const perSecond = heat.demand.add(1, now) * 1000
    const hotRate = Math.min(...policies.map((policy) => policy.hotRate))
    if (!heat.hot && perSecond >= hotRate) heat.hot = true
    else if (heat.hot && perSecond < hotRate / 2) {
      heat.hot = false
      this.leases.drop(key, policies)
    }
    return heat.hot
  }

  private forgetOne(): void {
    for (const name of this.heat.keys()) {
      this.heat.delete(name)
      return
    }
  }

  private heatKey(key: string, policies: readonly Policy[]): string {
    return `${policySetId(policies)}\u0000${key}`
  }
}
