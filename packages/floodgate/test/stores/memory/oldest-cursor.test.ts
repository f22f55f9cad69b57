// OldestCursor: always names the first live entry of its Map, as a fresh iteration would, across
// inserts, moves to the young end, deletes, table rebuilds and clears.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import { OldestCursor } from '../../../src/stores/memory/oldest-cursor.js'
import type { KeyEntry } from '../../../src/stores/memory/key-entry.js'

function entry(movedAt: number): KeyEntry {
  return {
    policies: [],
    records: [],
    deadAt: 0,
    lastSet: undefined,
    lastIndex: [],
    lastProtectBelow: [],
    movedAt,
    protected: false,
    bytes: 0,
  }
}

describe('OldestCursor', () => {
  it('answers what a fresh iteration answers, with the store stamping movedAt as it does', () => {
    const op = fc.record({
      kind: fc.constantFrom('insert', 'insert', 'insert', 'move', 'remove', 'dropOldest', 'peek', 'clear'),
      key: fc.nat(200),
    })
    fc.assert(
      fc.property(fc.array(op, { maxLength: 400 }), (ops) => {
        const segment = new Map<string, KeyEntry>()
        const cursor = new OldestCursor(segment)
        let moves = 0
        const remove = (key: string) => {
          const held = segment.get(key)
          if (held === undefined) return
          segment.delete(key)
          held.movedAt = -1
        }
        for (const { kind, key } of ops) {
          const name = `k${key}`
          if (kind === 'insert') {
            remove(name)
            segment.set(name, entry(++moves))
          } else if (kind === 'move') {
            const held = segment.get(name)
            if (held !== undefined) {
              segment.delete(name)
              segment.set(name, held)
              held.movedAt = ++moves
            }
          } else if (kind === 'remove') {
            remove(name)
          } else if (kind === 'dropOldest') {
            const oldest = cursor.first()
            if (oldest !== undefined) remove(oldest[0])
          } else if (kind === 'clear') {
            for (const held of segment.values()) held.movedAt = -1
            segment.clear()
            cursor.clear()
          }
          const expected = segment.entries().next()
          const got = cursor.first()
          if (expected.done === true) assert.equal(got, undefined)
          else assert.deepEqual([got?.[0], got?.[1]], [expected.value[0], expected.value[1]])
        }
      }),
      { numRuns: 300 },
    )
  })

  it('drops the oldest of many keys without walking the holes of earlier deletes', () => {
    // The store's pattern for lapsed keys: insert one, drop the oldest. Checks order, not time.
    const segment = new Map<string, KeyEntry>()
    const cursor = new OldestCursor(segment)
    for (let i = 0; i < 1000; i++) segment.set(`k${i}`, entry(i + 1))
    for (let i = 1000; i < 20_000; i++) {
      segment.set(`k${i}`, entry(i + 1))
      const oldest = cursor.first()!
      assert.equal(oldest[0], `k${i - 1000}`)
      segment.delete(oldest[0])
      oldest[1].movedAt = -1
    }
    assert.equal(segment.size, 1000)
  })
})
