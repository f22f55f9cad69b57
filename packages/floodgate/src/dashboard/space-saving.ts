// Space-Saving heavy hitters (Metwally et al. 2005): the most frequent keys of a stream in a fixed number of counters.

import { FloodgateError } from '../core/errors.js'

/** One monitored key: its estimated count and how much of it may belong to keys it displaced. */
export interface HeavyHitter {
  key: string
  /** Estimated weight: never below the true weight, at most `error` above it. */
  count: number
  /** Overestimation bound: the true weight lies in `[count - error, count]`. */
  error: number
}

interface Slot {
  key: string
  count: number
  error: number
  /** Position in the heap, kept so an increment can restore heap order from where the slot is. */
  at: number
}

/**
 * A Space-Saving sketch of `capacity` counters. A new key, once every counter is taken, replaces
 * the key with the smallest count and inherits that count as its error: so memory never grows past
 * `capacity` entries, however many distinct keys arrive, and every key whose true weight exceeds
 * `total / capacity` is guaranteed to be monitored. The counters sit in a binary min-heap so both
 * an increment and a replacement cost O(log capacity), not a scan: a flood of unique keys is the
 * case this exists for, and each of them replaces the minimum.
 */
export class SpaceSaving {
  readonly capacity: number
  readonly #heap: Slot[] = []
  readonly #slots = new Map<string, Slot>()
  #total = 0

  constructor(capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) {
      throw new FloodgateError('INVALID_OPTION', `capacity: expected a whole number ≥ 1, got ${capacity}`)
    }
    this.capacity = capacity
  }

  /** Keys monitored now (at most `capacity`). */
  get size(): number {
    return this.#heap.length
  }

  /** The weight of everything ever added. */
  get total(): number {
    return this.#total
  }

  /** Adds `weight` (> 0) to `key`. */
  add(key: string, weight = 1): void {
    if (!(weight > 0)) return
    this.#total += weight
    const slot = this.#slots.get(key)
    if (slot !== undefined) {
      slot.count += weight
      this.#down(slot.at)
      return
    }
    if (this.#heap.length < this.capacity) {
      const fresh: Slot = { key, count: weight, error: 0, at: this.#heap.length }
      this.#heap.push(fresh)
      this.#slots.set(key, fresh)
      this.#up(fresh.at)
      return
    }
    // Every counter is taken: the smallest gives its place (and its count, as error) to the new key.
    const min = this.#heap[0]
    this.#slots.delete(min.key)
    min.key = key
    min.error = min.count
    min.count += weight
    this.#slots.set(key, min)
    this.#down(0)
  }

  /** The key's estimate, or undefined when it is not monitored (its weight is then at most `floor`). */
  get(key: string): HeavyHitter | undefined {
    const slot = this.#slots.get(key)
    return slot === undefined ? undefined : { key, count: slot.count, error: slot.error }
  }

  /** The monitored keys, heaviest first. */
  top(limit = this.capacity): HeavyHitter[] {
    return this.#heap
      .map(({ key, count, error }) => ({ key, count, error }))
      .sort((a, b) => b.count - a.count || a.key.localeCompare(b.key))
      .slice(0, limit)
  }

  /** The smallest monitored count (0 while a counter is free): any key not monitored has at most this weight. */
  get floor(): number {
    return this.#heap.length < this.capacity ? 0 : this.#heap[0].count
  }

  clear(): void {
    this.#heap.length = 0
    this.#slots.clear()
    this.#total = 0
  }

  #up(at: number): void {
    const heap = this.#heap
    const slot = heap[at]
    while (at > 0) {
      const parent = (at - 1) >> 1
      if (heap[parent].count <= slot.count) break
      heap[at] = heap[parent]
      heap[at].at = at
      at = parent
    }
    heap[at] = slot
    slot.at = at
  }

  #down(at: number): void {
    const heap = this.#heap
    const slot = heap[at]
    const length = heap.length
    for (;;) {
      const left = 2 * at + 1
      if (left >= length) break
      const right = left + 1
      const child = right < length && heap[right].count < heap[left].count ? right : left
      if (heap[child].count >= slot.count) break
      heap[at] = heap[child]
      heap[at].at = at
      at = child
    }
    heap[at] = slot
    slot.at = at
  }
}
