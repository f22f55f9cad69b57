// The least recently used entry of one of the store's LRU Maps, found in amortised O(1).

import type { KeyEntry } from './key-entry.js'

/**
 * Remembers where the oldest live entry of `segment` is. V8 leaves a hole in a Map for each
 * deleted entry until the table is next rebuilt, and a new iterator walks every hole before the
 * first live entry: a store that drops its oldest key on every insert (expired keys, a flood past
 * maxKeys) made each `entries().next()` walk thousands of holes, 10× the cost of a decision. One
 * iterator kept across calls walks each hole once. A Map iterator stays valid across deletes,
 * inserts and rebuilds and visits entries added after it, so the entries it has not reached yet
 * are exactly the live ones in LRU order.
 *
 * The entry it last returned (the head) is still the oldest while it is in `segment` at the same
 * place: the store stamps `movedAt` afresh whenever an entry is inserted, moved or removed, so an
 * unchanged stamp proves it, without a Map lookup.
 *
 * An iterator that is not advanced keeps alive every table the Map outgrew since (V8 moves it to the
 * new table only on its next step): parked while a store fills, it held ~34 B per key. So it is let
 * go once the Map has grown by an eighth since it was made; the next one walks the holes left since
 * the last rebuild once, amortised over that growth.
 */
export class OldestCursor {
  private iterator: Iterator<[string, KeyEntry]> | undefined
  private head: [string, KeyEntry] | undefined
  private headStamp = 0
  private madeAtSize = 0

  constructor(private readonly segment: Map<string, KeyEntry>) {}

  /** The least recently used entry, or undefined when the segment is empty. */
  first(): [string, KeyEntry] | undefined {
    const head = this.head
    const size = this.segment.size
    if (head !== undefined && head[1].movedAt === this.headStamp) {
      if (size - this.madeAtSize > 16 + (this.madeAtSize >>> 3)) this.iterator = undefined
      return head
    }
    let iterator = this.iterator
    if (iterator === undefined) iterator = this.makeIterator(size)
    let next = iterator.next()
    // An iterator that ran to the end never sees later inserts: start another one.
    if (next.done === true) {
      iterator = this.makeIterator(size)
      next = iterator.next()
    }
    if (next.done === true) {
      this.iterator = undefined
      this.head = undefined
      return undefined
    }
    this.head = next.value
    this.headStamp = next.value[1].movedAt
    return next.value
  }

  private makeIterator(size: number): Iterator<[string, KeyEntry]> {
    this.madeAtSize = size
    return (this.iterator = this.segment.entries())
  }

  /** Forgets its place (after the segment is cleared). */
  clear(): void {
    this.iterator = undefined
    this.head = undefined
  }
}
