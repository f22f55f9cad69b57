// OldestCursor: always names the first live entry of its Map, as a fresh iteration would, across
// inserts, moves to the young end, values changed in place, deletes, table rebuilds and clears.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import { OldestCursor } from '../../../src/stores/memory/oldest-cursor.js'

describe('OldestCursor', () => {
  it('answers what a fresh iteration answers, told of deletes and changes as the store tells it', () => {
    const op = fc.record({
      kind: fc.constantFrom('insert', 'insert', 'insert', 'move', 'change', 'remove', 'dropOldest', 'peek', 'clear'),
      key: fc.nat(200),
    })
    fc.assert(
      fc.property(fc.array(op, { maxLength: 400 }), (ops) => {
        const segment = new Map<string, number>()
        const cursor = new OldestCursor(segment)
        let values = 0
        const remove = (key: string) => {
          if (!segment.has(key)) return
          segment.delete(key)
          cursor.left(key)
        }
        for (const { kind, key } of ops) {
          const name = `k${key}`
          if (kind === 'insert') {
            remove(name)
            segment.set(name, ++values)
          } else if (kind === 'move') {
            const held = segment.get(name)
            if (held !== undefined) {
              remove(name)
              segment.set(name, held)
            }
          } else if (kind === 'change') {
            if (segment.has(name)) {
              segment.set(name, ++values)
              cursor.changed(name, values)
            }
          } else if (kind === 'remove') {
            remove(name)
          } else if (kind === 'dropOldest') {
            const oldest = cursor.first()
            if (oldest !== undefined) remove(oldest[0])
          } else if (kind === 'clear') {
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
    const segment = new Map<string, number>()
    const cursor = new OldestCursor(segment)
    for (let i = 0; i < 1000; i++) segment.set(`k${i}`, i)
    for (let i = 1000; i < 20_000; i++) {
      segment.set(`k${i}`, i)
      const oldest = cursor.first()!
      assert.equal(oldest[0], `k${i - 1000}`)
      segment.delete(oldest[0])
      cursor.left(oldest[0])
    }
    assert.equal(segment.size, 1000)
  })
})
