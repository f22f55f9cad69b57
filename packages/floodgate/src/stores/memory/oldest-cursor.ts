// The least recently used entry of one of the store's LRU Maps, found in amortised O(1).

/**
 * Remembers where the oldest live entry of `segment` is. V8 leaves a hole in a Map for each
 * deleted entry until the table is next rebuilt, and a new iterator walks every hole before the
 * first live entry: a store that drops its oldest key on every insert (expired keys, a flood past
 * maxKeys) made each `entries().next()` walk thousands of holes, far dearer than the decision. One
 * iterator kept across calls walks each hole once. A Map iterator stays valid across deletes,
 * inserts and rebuilds and visits entries added after it, so the entries it has not reached yet
 * are exactly the live ones in LRU order.
 *
 * The entry it last returned (the head) stays the oldest until it leaves its place: the owner of
 * the Map calls `left` whenever it deletes a key (to remove it or move it to the young end) and
 * `changed` when it sets a new value for a key in place.
 *
 * An iterator that is not advanced keeps alive every table the Map outgrew since (V8 moves it to the
 * new table only on its next step): parked while a store fills, it held ~34 B per key. So it is let
 * go once the Map has grown by an eighth since it was made; the next one walks the holes left since
 * the last rebuild once, amortised over that growth.
 */
export class OldestCursor<V> {
  private iterator: Iterator<[string, V]> | undefined
  private head: [string, V] | undefined
  private madeAtSize = 0

  constructor(private readonly segment: Map<string, V>) {}

  /** The least recently used entry, or undefined when the segment is empty. */
  first(): [string, V] | undefined {
    const head = this.head
    const size = this.segment.size
    if (head !== undefined) {
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
      return undefined
    }
    this.head = next.value
    return next.value
  }

  /** `key` was deleted from the segment: if it was the head, the next entry is the oldest. */
  left(key: string): void {
    if (this.head !== undefined && this.head[0] === key) this.head = undefined
  }

  /** `key` was given a new value in place (same position). */
  changed(key: string, value: V): void {
    if (this.head !== undefined && this.head[0] === key) this.head[1] = value
  }

  private makeIterator(size: number): Iterator<[string, V]> {
    this.madeAtSize = size
    return (this.iterator = this.segment.entries())
  }

  /** Forgets its place (after the segment is cleared). */
  clear(): void {
    this.iterator = undefined
    this.head = undefined
  }
}
