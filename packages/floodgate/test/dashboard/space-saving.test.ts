// The top-keys sketch: constant memory under a flood of unique keys, true heavy hitters found, bounds that hold.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import { RecentTopKeys, SpaceSaving } from '../../src/dashboard.js'

describe('SpaceSaving', () => {
  it('keeps at most `capacity` keys through 1M unique keys and still finds the heavy hitter', () => {
    const sketch = new SpaceSaving(100)
    let heavy = 0
    let maxSize = 0
    // 1M unique keys, and one key sent as 2% of the stream, interleaved through it.
    for (let i = 0; i < 1_000_000; i++) {
      sketch.add(`flood-${i}`)
      if (i % 50 === 0) {
        sketch.add('attacker')
        heavy++
      }
      if (sketch.size > maxSize) maxSize = sketch.size
    }
    assert.equal(maxSize, 100)
    assert.equal(sketch.total, 1_000_000 + heavy)
    const [first] = sketch.top(1)
    assert.equal(first.key, 'attacker')
    // Space-Saving never undercounts, and overcounts by at most its error.
    assert.ok(first.count >= heavy && first.count - first.error <= heavy, JSON.stringify({ first, heavy }))
  })

  it('holds its guarantees on random streams, against exact counts', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 12 }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 40 }), fc.integer({ min: 1, max: 5 })), { maxLength: 400 }),
        (capacity, stream) => {
          const sketch = new SpaceSaving(capacity)
          const exact = new Map<string, number>()
          let total = 0
          for (const [id, weight] of stream) {
            sketch.add(`k${id}`, weight)
            exact.set(`k${id}`, (exact.get(`k${id}`) ?? 0) + weight)
            total += weight
          }
          assert.ok(sketch.size <= capacity)
          assert.equal(sketch.total, total)
          const top = sketch.top()
          for (const hitter of top) {
            const truth = exact.get(hitter.key)!
            assert.ok(hitter.count >= truth && hitter.count - hitter.error <= truth)
          }
          // Every key heavier than total / capacity is monitored; an unmonitored one weighs at most the floor.
          for (const [key, truth] of exact) {
            const hitter = sketch.get(key)
            if (truth > total / capacity) assert.ok(hitter !== undefined, `${key} (${truth} of ${total}) is monitored`)
            if (hitter === undefined) assert.ok(truth <= sketch.floor)
          }
        },
      ),
    )
  })
})

describe('RecentTopKeys', () => {
  it('stays within windows × capacity entries under a flood, and finds the key denied most', () => {
    const recent = new RecentTopKeys({ capacity: 50, windowMs: 1000, windows: 3 })
    let now = 0
    let maxSize = 0
    for (let i = 0; i < 200_000; i++) {
      now = i // 1000 keys a millisecond-second: the windows rotate 200 times
      recent.add(`ip-${i}`, 1, now)
      if (i % 20 === 0) recent.add('abuser', 1, now)
      if (recent.size > maxSize) maxSize = recent.size
    }
    assert.ok(maxSize <= 150, `held ${maxSize}`)
    const [first] = recent.top(5, now)
    assert.equal(first.key, 'abuser')
    // The span is the current window and the two before: between 2000 and 3000 ms of arrivals.
    assert.ok(first.count - first.error <= 150 && first.count >= 100, JSON.stringify(first))
  })

  it('forgets a key once its windows have passed', () => {
    const recent = new RecentTopKeys({ capacity: 4, windowMs: 60_000, windows: 2 })
    recent.add('old', 10, 0)
    recent.add('new', 1, 60_000)
    assert.deepEqual(
      recent.top(5, 60_000).map((k) => k.key),
      ['old', 'new'],
    )
    // Two windows: at 120 s the window of 0–60 s has passed, the one of 60–120 s is still live.
    assert.deepEqual(
      recent.top(5, 120_000).map((k) => k.key),
      ['new'],
    )
    recent.add('newer', 2, 180_000)
    assert.deepEqual(recent.top(5, 180_000), [{ key: 'newer', count: 2, error: 0 }])
  })

  it('keeps long keys as their hash, so an entry is bounded in bytes', () => {
    const recent = new RecentTopKeys({ capacity: 4, windowMs: 1000, windows: 1 })
    recent.add('x'.repeat(10_000), 1, 0)
    assert.match(recent.top(1, 0)[0].key, /^sha256:[0-9a-f]{16}$/)
  })

  it('rejects a sketch with no room', () => {
    assert.throws(() => new SpaceSaving(0), { code: 'INVALID_OPTION', message: /capacity/ })
    assert.throws(() => new RecentTopKeys({ windows: 0 }), { code: 'INVALID_OPTION', message: /windows/ })
  })
})
