// The deny cache: keys known to be over their limit are answered in-process until their retry time.

import { fromDenyCache } from './decisions.js'
import type { PolicyPlan } from './policy-plan.js'
import type { Decision } from './types.js'

/** One remembered denial: valid while `now < until`, and only for the plan (policy set) that made it. */
export interface DeniedEntry<T> {
  readonly until: number
  readonly owner: object
  readonly value: T
}

/**
 * A bounded LRU of denials. Under a flood from one abusive key, every call after the first denial
 * costs a Map lookup instead of a store round trip; a flood of unique keys cannot grow it past
 * `maxKeys` (the oldest denial is forgotten, which only costs one store call later). Hits do not
 * reorder entries: a key denied again is re-inserted at the young end anyway.
 *
 * Being pushed out of here never resets a limit: the denial is only a copy of what the store holds,
 * and the store keeps the key's state (the MemoryStore evicts keys without a restriction first).
 */
export class DenyCache<T> {
  readonly maxKeys: number
  private readonly entries = new Map<string, DeniedEntry<T>>()

  constructor(maxKeys: number) {
    this.maxKeys = maxKeys
  }

  get size(): number {
    return this.entries.size
  }

  /** The live denial for `key` made by `owner`, or undefined (expired ones are dropped on the way). */
  get(key: string, owner: object, now: number): DeniedEntry<T> | undefined {
    const entry = this.entries.get(key)
    if (entry === undefined) return undefined
    if (now >= entry.until || entry.owner !== owner) {
      this.entries.delete(key)
      return undefined
    }
    return entry
  }

  set(key: string, owner: object, until: number, value: T): void {
    const entries = this.entries
    entries.delete(key)
    entries.set(key, { until, owner, value })
    if (entries.size > this.maxKeys) {
      const oldest = entries.keys().next()
      if (!oldest.done) entries.delete(oldest.value)
    }
  }

  delete(key: string): void {
    this.entries.delete(key)
  }
}

/** A remembered denial and the cost it was for: a smaller cost might pass, so only the same cost hits. */
interface CachedDenial {
  decision: Decision
  cost: number
}

/**
 * The limiter's denials by (key, policy set, cost), on a DenyCache. Remembered: store denials with
 * a wait. Not remembered: denials by a concurrency policy (a release elsewhere may free a slot
 * early), pool denials (the pool moves with other keys), fallback decisions and peeks.
 */
export class Denials {
  private readonly cache: DenyCache<CachedDenial>

  constructor(
    maxKeys: number,
    private readonly clock: () => number,
  ) {
    this.cache = new DenyCache(maxKeys)
  }

  /** How many denials are remembered (expired ones included until looked up or pushed out). */
  get size(): number {
    return this.cache.size
  }

  /** The remembered denial of `cost` for `key` under `plan`, its waits shortened by the time passed. */
  lookup(key: string, plan: PolicyPlan, cost: number): Decision | undefined {
    const now = this.clock()
    const hit = this.cache.get(plan.cacheTag === '' ? key : plan.cacheTag + key, plan, now)
    if (hit === undefined || hit.value.cost !== cost) return undefined
    return fromDenyCache(hit.value.decision, hit.until, now)
  }

  /** Remembers a store's denial until its wait ends, unless a concurrency policy denied. */
  remember(key: string, plan: PolicyPlan, cost: number, decision: Decision): void {
    if (decision.source !== 'store' || decision.retryAfterMs <= 0 || deniedByConcurrency(plan, decision)) return
    this.cache.set(plan.cacheTag === '' ? key : plan.cacheTag + key, plan, this.clock() + decision.retryAfterMs, { decision, cost })
  }

  forget(key: string, plan: PolicyPlan): void {
    this.cache.delete(plan.cacheTag === '' ? key : plan.cacheTag + key)
  }
}

// A concurrency slot can be freed at any moment by a release elsewhere, so its wait is no promise.
function deniedByConcurrency(plan: PolicyPlan, decision: Decision): boolean {
  for (let i = 0; i < plan.policies.length; i++) {
    if (!decision.policies[i].allowed && plan.policies[i].algorithm === 'concurrency') return true
  }
  return false
}
