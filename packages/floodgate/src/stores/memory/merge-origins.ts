// Which merges each record of the embedded store has applied, so that a replayed merge counts once.

/**
 * The most origins a record remembers for merges. Past it the record forgets them all and starts
 * again, as merge.lua does: a replay then counts again, which takes more origins writing one key
 * within one retry than any deployment has instances or regions.
 */
export const MAX_ORIGINS = 64

/**
 * Per record (by the offset of its first word), the last seq applied per origin. Empty for stores
 * that never merge: only Store.merge writes it.
 */
export class MergeOrigins {
  private readonly byRecord = new Map<number, Map<string, number>>()

  get size(): number {
    return this.byRecord.size
  }

  /** Whether the record at `base` has applied `seq` from `origin`. */
  seenBefore(base: number, origin: string, seq: number): boolean {
    const last = this.byRecord.get(base)?.get(origin)
    return last !== undefined && seq <= last
  }

  /** Remembers that the record at `base` applied `seq` from `origin`. */
  markSeen(base: number, origin: string, seq: number): void {
    let seen = this.byRecord.get(base)
    if (seen === undefined) this.byRecord.set(base, (seen = new Map()))
    if (seen.size >= MAX_ORIGINS && !seen.has(origin)) seen.clear()
    seen.set(origin, seq)
  }

  /** The record at `base` forgets its origins: it was freed, or it expired (as its Redis key would). */
  delete(base: number): void {
    this.byRecord.delete(base)
  }

  /** A record moved to another word keeps its origins. */
  move(source: number, target: number): void {
    const seen = this.byRecord.get(source)
    if (seen === undefined) return
    this.byRecord.delete(source)
    this.byRecord.set(target, seen)
  }

  clear(): void {
    this.byRecord.clear()
  }
}
