// Eviction of the embedded store's keys, when a decision takes the table past maxKeys or maxBytes.

import type { KeyTable } from './key-table.js'
import type { OldestCursor } from './oldest-cursor.js'

// Evicts until both bounds hold: a dead key first (it holds nothing; the oldest of each class is
// the likeliest to be one), then the least recently used open key, and only when none is left the
// least recently used protected key (forgiven: see MemoryStoreOptions.maxKeys). `used`, the key
// just decided, goes last: were it dropped, a new key would never be counted while protected keys
// fill the store.
export function makeRoom(table: KeyTable, used: number, now: number): void {
  while (table.size > table.maxKeys || table.bytes > table.maxBytes) {
    if (dropOldestIfDead(table, table.guardedOldest, now)) continue
    if (dropOldestIfDead(table, table.openOldest, now)) continue
    const open = oldestExcept(table.openOldest, table.open, used)
    if (open !== undefined) {
      table.remove(open[0], open[1], false)
      continue
    }
    const guarded = oldestExcept(table.guardedOldest, table.guarded, used)
    if (guarded !== undefined) {
      table.remove(guarded[0], guarded[1], true)
      continue
    }
    // Only `used` is left, and it alone is over maxBytes: it is not kept.
    for (const [key, at] of table.open) table.remove(key, at, false)
    for (const [key, at] of table.guarded) table.remove(key, at, true)
    return
  }
}

// O(1): the least recently used key is the likeliest to have expired, so making room checks it
// first; a store at its bound sheds dead keys without a sweeper timer.
function dropOldestIfDead(table: KeyTable, cursor: OldestCursor<number>, now: number): boolean {
  const oldest = cursor.first()
  if (oldest === undefined || now < deadAt(table, oldest[1])) return false
  table.remove(oldest[0], oldest[1], cursor === table.guardedOldest)
  return true
}

// The latest expiry of the key's records: past it the whole key holds nothing.
function deadAt(table: KeyTable, at: number): number {
  const layout = table.layoutAt(at)
  const f64 = table.slab.f64
  let deadAt = Number.NEGATIVE_INFINITY
  for (let i = 0; i < layout.at.length; i++) {
    const expiresAt = f64[at + layout.at[i]]
    if (expiresAt > deadAt) deadAt = expiresAt
  }
  return deadAt
}

/** The least recently used key of a class other than `used` (the first or the second). */
function oldestExcept(cursor: OldestCursor<number>, segment: Map<string, number>, used: number): [string, number] | undefined {
  const first = cursor.first()
  if (first === undefined || first[1] !== used) return first
  if (segment.size < 2) return undefined
  // Rare (the key just decided is the oldest of its class and others remain): a walk from the start.
  const order = segment.entries()
  order.next()
  return order.next().value
}
