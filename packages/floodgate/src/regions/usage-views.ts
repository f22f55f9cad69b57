// What this process knows of each (key, policy, window)'s usage across regions: a bounded map of merged copies.

import { mergeInto, type UsageFields } from './crdt.js'

interface View {
  readonly fields: Map<string, number>
  /** When the copy was last refreshed from the region's store (the process clock). */
  refreshedAt: number
}

const EMPTY: UsageFields = new Map()

/**
 * Copies by entry id, at most `maxEntries` (the least recently refreshed go first). A copy only
 * ever grows (merged by maximum), so a late or repeated answer can never move it back.
 */
export class UsageViews {
  private readonly views = new Map<string, View>()

  constructor(private readonly maxEntries: number) {}

  /** The fields of `id` (empty when unknown). */
  fields(id: string): UsageFields {
    return this.views.get(id)?.fields ?? EMPTY
  }

  /** When `id` was last refreshed from the region's store, or undefined when never. */
  refreshedAt(id: string): number | undefined {
    return this.views.get(id)?.refreshedAt
  }

  /** Merges `fields` into the copy of `id`; `refreshedAt` is set when they come from the region's store. */
  merge(id: string, fields: UsageFields, refreshedAt?: number): void {
    let view = this.views.get(id)
    if (view === undefined) {
      view = { fields: new Map(fields), refreshedAt: refreshedAt ?? -Infinity }
      if (this.views.size >= this.maxEntries) this.views.delete(this.views.keys().next().value!)
    } else {
      mergeInto(view.fields, fields)
      if (refreshedAt !== undefined) view.refreshedAt = refreshedAt
      this.views.delete(id)
    }
    this.views.set(id, view)
  }

  get size(): number {
    return this.views.size
  }
}
