// HeatTable: the bounded table of per-key heat behind sync: 'auto' (rates, eviction by clock hand).

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { HeatTable, type HeatOwner } from '../../../src/limiter/sync/heat-table.js'

// An owner reading rates over 1 s that keeps keys at 2 decisions a second or more (a hotRate of 8 a
// second: AutoSync keeps keys above a quarter of it read over 1 s).
const owner = (): HeatOwner => ({ keys: new Map(), windowMs: 1000, keepPerMs: 2 / 1000 })

// Counts one decision of `key` at `now`, following it first if it is new; returns its rate per ms.
function decide(table: HeatTable<HeatOwner>, set: HeatOwner, key: string, now: number): number {
  return table.count(set.keys.get(key) ?? table.add(key, set, now), now)
}

describe('HeatTable', () => {
  it("reads a steady stream's rate and lets a quiet key's decay", () => {
    const set = owner()
    const table = new HeatTable<HeatOwner>(10, () => {})
    let rate = 0
    // 20 decisions a second for 5 s: read just after a decision, 0.001 / (1 − e^-0.05) per ms (a
    // steady stream's rate, 0.02, plus the half step its sawtooth peaks at), less e^-5 of start-up.
    for (let now = 0; now < 5000; now += 50) rate = decide(table, set, 'k', now)
    const peak = 0.001 / (1 - Math.exp(-0.05))
    assert.ok(Math.abs(rate - peak) < peak * 0.01, `rate ${rate}`)
    // Then quiet for 3 s: the next decision reads e^-3 of it plus its own.
    const after = decide(table, set, 'k', 4950 + 3000)
    assert.ok(Math.abs(after - (rate * Math.exp(-3) + 0.001)) < 1e-9, `rate ${after}`)
  })

  it('follows at most maxKeys keys, and a flood of one-off keys never pushes out a hot or warming one', () => {
    const set = owner()
    const forgotten: string[] = []
    const table = new HeatTable<HeatOwner>(8, (key) => forgotten.push(key))
    // Two keys at 50 decisions a second (one marked hot), and 6 one-off keys filling the table.
    for (let now = 0; now < 1000; now += 20) {
      decide(table, set, 'hot', now)
      decide(table, set, 'warming', now)
    }
    table.setHot(set.keys.get('hot')!, true)
    for (let i = 0; i < 6; i++) decide(table, set, `once-${i}`, 1000)
    assert.equal(table.size, 8)
    // 1000 more one-off keys, interleaved with the two busy ones at their pace.
    for (let i = 0; i < 1000; i++) {
      const now = 1000 + i
      decide(table, set, `flood-${i}`, now)
      if (i % 20 === 0) {
        decide(table, set, 'hot', now)
        decide(table, set, 'warming', now)
      }
      assert.equal(table.size, 8)
      assert.equal(set.keys.size, 8)
    }
    assert.ok(set.keys.has('hot') && set.keys.has('warming'), 'a busy key was forgotten')
    assert.equal(table.isHot(set.keys.get('hot')!), true)
    assert.deepEqual(forgotten, [], 'no hot key was forgotten')
    // The last one-off keys are followed, each in a slot of its own.
    assert.equal(new Set(set.keys.values()).size, 8)
    assert.ok(set.keys.has('flood-999'))
  })

  it('forgets a hot key once it has cooled, and says so (its lease is to be given back)', () => {
    const set = owner()
    const forgotten: string[] = []
    const table = new HeatTable<HeatOwner>(2, (key, from) => forgotten.push(`${key}@${from === set ? 'set' : '?'}`))
    for (let now = 0; now < 1000; now += 20) decide(table, set, 'followed', now)
    table.setHot(set.keys.get('followed')!, true)
    // 5 s quiet: its rate decays to e^-5 of 50/s, below a quarter of the threshold.
    decide(table, set, 'other-1', 6000)
    assert.deepEqual(forgotten, [])
    decide(table, set, 'other-2', 6000)
    assert.deepEqual(forgotten, ['followed@set'])
    assert.equal(set.keys.has('followed'), false)
    assert.equal(table.hotCount(), 0)
  })

  it('with every key probed warm, the next one goes anyway: memory stays bounded', () => {
    const set = owner()
    const forgotten: string[] = []
    const table = new HeatTable<HeatOwner>(20, (key) => forgotten.push(key))
    // 20 keys, each at 50 decisions a second and hot.
    for (let now = 0; now < 1000; now += 20) for (let k = 0; k < 20; k++) decide(table, set, `k${k}`, now)
    for (let k = 0; k < 20; k++) table.setHot(set.keys.get(`k${k}`)!, true)
    decide(table, set, 'new', 1000)
    assert.equal(set.keys.size, 20)
    assert.equal(forgotten.length, 1)
    assert.equal(set.keys.has('new'), true)
    assert.equal(table.hotCount(), 19)
  })

  it('grows its arrays past the first capacity and keeps every rate', () => {
    const set = owner()
    const table = new HeatTable<HeatOwner>(5000, () => {})
    for (let k = 0; k < 5000; k++) decide(table, set, `k${k}`, 0)
    assert.equal(table.size, 5000)
    for (let k = 0; k < 5000; k += 499) assert.equal(decide(table, set, `k${k}`, 0), 0.002)
  })
})
