// The most limited keys of the last few minutes: Space-Saving sketches over rotating windows, merged when read.

import { createHash } from 'node:crypto'
import { FloodgateError } from '../core/errors.js'
import { SpaceSaving } from './space-saving.js'

/** Key text kept as is up to this length; a longer key is kept as its hash, so an entry's size is bounded in bytes too. */
export const MAX_KEPT_KEY_LENGTH = 200

export interface RecentTopKeysOptions {
  /** Counters per window (default 100): every key with more than 1/capacity of a window's weight is found. */
  capacity?: number
  /** Length of one window in ms (default 60 000). */
  windowMs?: number
  /** Windows kept (default 5): the answer covers the last `windows - 1` whole windows and the current one. */
  windows?: number
}

/** One key of the answer. */
export interface RecentKey {
  key: string
  /** Estimated weight over the span (never below the truth). */
  count: number
  /** The truth lies in `[count - error, count]`. */
  error: number
}

/** `sha256:` and the first 16 hex digits of the key's SHA-256 (`printf %s "$key" | sha256sum`), as the service's debug log shows keys. */
export function hashKey(key: string): string {
  return `sha256:${createHash('sha256').update(key).digest('hex').slice(0, 16)}`
}

/**
 * Heavy hitters over a sliding span of whole windows. Each window is its own sketch of fixed
 * capacity; when the clock enters a new window the oldest sketch is cleared and reused, so memory
 * is `windows × capacity` entries whatever the traffic. Rotating windows rather than decaying
 * counts keep the figures readable: a count is "denials in the last N minutes", not a weighted sum.
 */
export class RecentTopKeys {
  readonly capacity: number
  readonly windowMs: number
  readonly #sketches: SpaceSaving[]
  /** The window number each sketch holds (floor(time / windowMs)); -1 when empty. */
  readonly #windowOf: number[]

  constructor(options: RecentTopKeysOptions = {}) {
    this.capacity = options.capacity ?? 100
    this.windowMs = options.windowMs ?? 60_000
    const windows = options.windows ?? 5
    if (!Number.isInteger(windows) || windows < 1) {
      throw new FloodgateError('INVALID_OPTION', `windows: expected a whole number ≥ 1, got ${windows}`)
    }
    if (!(this.windowMs > 0)) throw new FloodgateError('INVALID_OPTION', `windowMs: expected a positive number, got ${this.windowMs}`)
    this.#sketches = Array.from({ length: windows }, () => new SpaceSaving(this.capacity))
    this.#windowOf = new Array<number>(windows).fill(-1)
  }

  /** How far back an answer reaches at most. */
  get spanMs(): number {
    return this.#sketches.length * this.windowMs
  }

  /** Entries held in every window together: bounded by `windows × capacity`. */
  get size(): number {
    let size = 0
    for (const sketch of this.#sketches) size += sketch.size
    return size
  }

  /** Adds `weight` to `key` at time `now` (ms). */
  add(key: string, weight: number, now: number): void {
    const text = key.length > MAX_KEPT_KEY_LENGTH ? hashKey(key) : key
    this.#current(now).add(text, weight)
  }

  /**
   * The heaviest keys of the live windows, merged as Space-Saving summaries merge: a key a
   * window does not monitor may still have up to that window's floor there, which is added to its
   * count and to its error, so `count` stays an upper bound and `count - error` a lower one.
   */
  top(limit: number, now: number): RecentKey[] {
    const window = Math.floor(now / this.windowMs)
    const live: SpaceSaving[] = []
    for (let i = 0; i < this.#sketches.length; i++) {
      if (this.#windowOf[i] > window - this.#sketches.length && this.#windowOf[i] <= window) live.push(this.#sketches[i])
    }
    const keys = new Set<string>()
    for (const sketch of live) for (const hitter of sketch.top()) keys.add(hitter.key)
    const merged: RecentKey[] = []
    for (const key of keys) {
      const entry: RecentKey = { key, count: 0, error: 0 }
      for (const sketch of live) {
        const hitter = sketch.get(key)
        const floor = sketch.floor
        entry.count += hitter === undefined ? floor : hitter.count
        entry.error += hitter === undefined ? floor : hitter.error
      }
      merged.push(entry)
    }
    return merged.sort((a, b) => b.count - a.count || a.key.localeCompare(b.key)).slice(0, limit)
  }

  #current(now: number): SpaceSaving {
    const window = Math.floor(now / this.windowMs)
    const at = ((window % this.#sketches.length) + this.#sketches.length) % this.#sketches.length
    if (this.#windowOf[at] !== window) {
      this.#sketches[at].clear()
      this.#windowOf[at] = window
    }
    return this.#sketches[at]
  }
}
