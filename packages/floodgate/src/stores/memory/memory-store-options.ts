// The MemoryStore's options: what each bounds and why, and their validation.

import { FloodgateError } from '../../core/errors.js'

export interface MemoryStoreOptions {
  /**
   * Most keys kept at once (default 100 000), a strict bound: a flood of unique keys (random IPv6
   * addresses) cannot grow the process without bound. Past it a key is dropped, and a dropped key
   * starts fresh when it comes back (forgiven, never wrongly punished), so eviction chooses whom to
   * forgive carefully. Keys are kept in two classes, each in LRU order (to within half the store: a
   * key moves to the young end only when maxKeys/2 other keys moved since it last did):
   * - protected: keys whose last decision denied (blocked ones included) or that have used more
   *   than half the capacity of one of their policies. Forgetting one would hand its owner a reset.
   * - open: every other key; forgetting one gives back less than half a limit.
   *
   * A key whose records have all expired stays until its room is needed (a key that lapses between
   * visits is updated in place when it returns), and then goes first (it holds nothing); then the
   * least recently used open key, and a protected key only when protected keys alone fill the
   * store: then the least recently used of them is forgiven. A flood of fresh keys therefore never
   * resets a limited key; an attacker must bring maxKeys keys of their own to their limits to force
   * one out. Size maxKeys above the number of keys you expect to be limited at once.
   */
  maxKeys?: number
  /**
   * Most memory the keys may hold, in bytes (default 64 MiB), enforced like maxKeys. Counted
   * cheaply, not measured: per key a fixed overhead plus 2 bytes per character of the key and 8
   * bytes per number of its records (a block of numbers: an expiry and the state per
   * policy), and per state that grows with use an array's overhead plus 8 bytes per number (a
   * sliding-log keeps two per request in its window). Hash long, client-supplied keys before they
   * get here (`boundedKey`).
   * A single key larger than maxBytes is not kept.
   */
  maxBytes?: number
  /** Milliseconds since the epoch when a request carries no `now` (default `Date.now`); tests inject one. */
  clock?: () => number
}

/** The options with their defaults, checked: a user's mistake is a FloodgateError saying what to change. */
export function resolveMemoryStoreOptions(options: MemoryStoreOptions): Required<MemoryStoreOptions> {
  if (options === null || typeof options !== 'object') {
    throw new FloodgateError('INVALID_OPTION', 'MemoryStore options: expected an object like { maxKeys: 100000 }')
  }
  const maxKeys = options.maxKeys ?? 100_000
  if (typeof maxKeys !== 'number' || !Number.isInteger(maxKeys) || maxKeys < 1) {
    throw new FloodgateError('INVALID_OPTION', `maxKeys: must be a whole number ≥ 1, got ${JSON.stringify(maxKeys)}`)
  }
  const maxBytes = options.maxBytes ?? 64 * 1024 * 1024
  if (typeof maxBytes !== 'number' || !Number.isSafeInteger(maxBytes) || maxBytes < 1) {
    throw new FloodgateError(
      'INVALID_OPTION',
      `maxBytes: must be a whole number of bytes ≥ 1, e.g. 67108864 for 64 MiB, got ${JSON.stringify(maxBytes)}`,
    )
  }
  if (options.clock !== undefined && typeof options.clock !== 'function') {
    throw new FloodgateError('INVALID_OPTION', 'clock: must be a function returning milliseconds since the epoch')
  }
  return { maxKeys, maxBytes, clock: options.clock ?? Date.now }
}
