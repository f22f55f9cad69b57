// Split mode's recent demand (demand.ts): what a region wants follows its last horizon, not its whole
// window, and what it asks its peers for is spread over those that hold spare units.

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import { demandField, grantField, usedField } from '../../src/regions/crdt.js'
import { asksOf, DemandMeter } from '../../src/regions/demand.js'

const REGIONS = ['ap', 'eu', 'us']
const HORIZON = 500

function fieldsOf(values: Record<string, number>): Map<string, number> {
  return new Map(Object.entries(values))
}

describe('DemandMeter', () => {
  it('reads a burst at once, and nothing a horizon after the demand stopped, however large the window’s count', () => {
    const meter = new DemandMeter(REGIONS, HORIZON)
    meter.observe(0, fieldsOf({}))
    assert.equal(meter.recent('us'), undefined, 'unknown before two samples')
    meter.observe(100, fieldsOf({ [demandField('us')]: 1500 }))
    // 1500 in one interval: at that rate, five times as much over the horizon.
    assert.equal(meter.recent('us'), 7500)
    meter.observe(200, fieldsOf({ [demandField('us')]: 1500 }))
    assert.equal(meter.recent('us'), 1500, 'a region that just went quiet keeps what the last horizon asked')
    for (let at = 300; at <= 700; at += 100) meter.observe(at, fieldsOf({ [demandField('us')]: 1500 }))
    assert.equal(meter.recent('us'), 0, 'a horizon later it wants nothing')
    assert.equal(meter.recent('ap'), 0)
  })

  it('one request just before a tick is not read as a flood', () => {
    const meter = new DemandMeter(REGIONS, HORIZON)
    meter.observe(0, fieldsOf({}))
    meter.observe(1, fieldsOf({ [demandField('eu')]: 1 }))
    assert.equal(meter.recent('eu'), 5)
  })

  it('an entry looked at after a long while reads its average over the span, not its whole growth', () => {
    const meter = new DemandMeter(REGIONS, HORIZON)
    meter.observe(0, fieldsOf({ [demandField('eu')]: 100 }))
    meter.observe(5_000, fieldsOf({ [demandField('eu')]: 600 }))
    assert.equal(meter.recent('eu'), 50)
  })

  it('keeps a bounded number of samples, and steady demand reads as its rate over the horizon', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: 200 }), { minLength: 2, maxLength: 300 }), (gaps) => {
        // Long enough for a horizon to have passed since the first sample.
        fc.pre(gaps.reduce((a, b) => a + b, 0) - gaps[0] >= HORIZON)
        const meter = new DemandMeter(REGIONS, HORIZON)
        let at = 0
        for (const gap of gaps) {
          at += gap
          // One unit per ms, steadily.
          meter.observe(at, fieldsOf({ [demandField('ap')]: at }))
        }
        const samples = (meter as unknown as { data: number[] }).data.length / (REGIONS.length + 1)
        assert.ok(samples <= 16)
        const recent = meter.recent('ap')!
        assert.ok(recent >= HORIZON - 1e-9, `steady 1/ms reads ${recent} over a ${HORIZON} ms horizon`)
      }),
    )
  })
})

describe('asksOf', () => {
  const LIMIT = 999

  it('asks for what the last horizon wants beyond what the region holds, spread by the peers’ spare units', () => {
    const meter = new DemandMeter(REGIONS, HORIZON)
    const before = fieldsOf({ [demandField('eu')]: 0 })
    meter.observe(0, before)
    // eu has used its 333 and had 600 asked of it in the last interval; ap holds 333 spare, us 333 but busy.
    const fields = fieldsOf({
      [usedField('eu')]: 333,
      [demandField('eu')]: 600,
      [demandField('us')]: 300,
      [usedField('us')]: 0,
    })
    meter.observe(500, fields)
    const asks = asksOf(LIMIT, REGIONS, 'eu', fields, meter)
    assert.deepEqual([...asks.keys()], ['ap', 'us'])
    // Wants 600 (one horizon's demand), holds 0: ap's spare is 333, us's 333 − 300.
    assert.equal(asks.get('ap')!.need + asks.get('us')!.need, 600 + 1)
    assert.ok(asks.get('ap')!.need > 8 * asks.get('us')!.need)
  })

  it('asks nothing once the demand stopped growing, nor while it holds enough', () => {
    const meter = new DemandMeter(REGIONS, HORIZON)
    meter.observe(0, fieldsOf({}))
    meter.observe(100, fieldsOf({ [demandField('eu')]: 50, [usedField('eu')]: 50 }))
    assert.equal(asksOf(LIMIT, REGIONS, 'eu', fieldsOf({ [demandField('eu')]: 50, [usedField('eu')]: 50 }), meter).size, 0)
    const held = fieldsOf({ [demandField('eu')]: 1000, [usedField('eu')]: 333, [grantField('ap', 'eu')]: 300 })
    meter.observe(200, held)
    const asks = asksOf(LIMIT, REGIONS, 'eu', held, meter)
    assert.equal(asks.get('ap')?.known, 300, 'what eu has heard ap gave it goes with the ask')
    meter.observe(300, held)
    assert.equal(asksOf(LIMIT, REGIONS, 'eu', held, meter).size, 0, 'quiet for a tick: no ask')
  })
})
