// The deny cache: keys known to be over their limit are answered in-process until their retry time.

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
