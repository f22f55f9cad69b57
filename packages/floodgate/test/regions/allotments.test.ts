// Split mode's allotments: base shares sum to the limit, and regions that hand units over by the
// rule (charge first, raise on hearing) never admit more than the limit together, whatever the
// order, delay, duplication or loss of their messages.

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import { allotment, baseShare, enforcedLimit, outstanding, planGives } from '../../src/regions/allotments.js'
import { demandField, demandOf, fold, grantField, mergeFields, usedField } from '../../src/regions/crdt.js'

const REGIONS = ['ap', 'eu', 'us']

describe('baseShare', () => {
  it('splits any limit among any regions with a sum of exactly the limit', () => {
    fc.assert(
      fc.property(fc.nat(1_000_000), fc.integer({ min: 1, max: 9 }), (limit, count) => {
        const regions = Array.from({ length: count }, (_, i) => `r${i}`)
        const shares = regions.map((region) => baseShare(limit, regions, region))
        assert.equal(
          shares.reduce((a, b) => a + b, 0),
          limit,
        )
        assert.ok(Math.max(...shares) - Math.min(...shares) <= 1)
      }),
    )
  })
})

describe('planGives', () => {
  it('gives at most the spare units, at most what each peer still wants, and all of one or the other', () => {
    fc.assert(
      fc.property(fc.integer({ min: -100, max: 2000 }), fc.array(fc.nat(800), { minLength: 0, maxLength: 4 }), (spare, needs) => {
        const wants = new Map(needs.map((need, i) => [`p${i}`, need]))
        const gives = planGives(spare, wants)
        const total = [...gives.values()].reduce((a, b) => a + b, 0)
        assert.ok(total <= Math.max(0, spare))
        for (const [peer, units] of gives) {
          assert.ok(Number.isInteger(units) && units > 0)
          assert.ok(units <= wants.get(peer)!)
        }
        // Nothing is left behind: the spare runs out, or every want is met.
        const wanted = needs.reduce((a, b) => a + b, 0)
        assert.equal(total, Math.min(Math.max(0, spare), wanted))
      }),
    )
  })

  it("counts what was given since the ask as answered, so a slow asker's repeated ask is not paid twice", () => {
    assert.equal(outstanding({ need: 300, known: 100 }, 100), 300)
    assert.equal(outstanding({ need: 300, known: 100 }, 250), 150)
    assert.equal(outstanding({ need: 300, known: 100 }, 500), 0)
  })
})

/** A region of the model: its state's count (admitted + handed away), and its copy of the usage hash. */
interface ModelRegion {
  name: string
  count: number
  admitted: number
  cumulativeGiven: Map<string, number>
  fields: Map<string, number>
}

type Command =
  | { kind: 'admit'; region: number; units: number }
  | { kind: 'give'; region: number; free: number }
  | { kind: 'deliver'; from: number; to: number }
  | { kind: 'demand'; region: number; units: number }

describe('split safety against a model', () => {
  it('the regions admit at most the limit together, at every step, under any delivery of messages', () => {
    const command: fc.Arbitrary<Command> = fc.oneof(
      { weight: 3, arbitrary: fc.record({ kind: fc.constant('admit' as const), region: fc.nat(2), units: fc.nat(8) }) },
      { weight: 3, arbitrary: fc.record({ kind: fc.constant('give' as const), region: fc.nat(2), free: fc.nat(2) }) },
      { weight: 4, arbitrary: fc.record({ kind: fc.constant('deliver' as const), from: fc.nat(2), to: fc.nat(2) }) },
      // Demand only in two regions: the third is idle and gives, as when clients move between regions.
      {
        weight: 2,
        arbitrary: fc.record({ kind: fc.constant('demand' as const), region: fc.nat(1), units: fc.integer({ min: 1, max: 40 }) }),
      },
    )
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 60 }), fc.array(command, { maxLength: 150 }), (limit, commands) => {
        const regions: ModelRegion[] = REGIONS.map((name) => ({
          name,
          count: 0,
          admitted: 0,
          cumulativeGiven: new Map(),
          fields: new Map(),
        }))
        const demand = [0, 0, 0]
        for (const step of commands) {
          if (step.kind === 'demand') {
            demand[step.region] += step.units
            fold(regions[step.region].fields, REGIONS[step.region], 'p', 'd', demand[step.region])
          } else if (step.kind === 'admit') {
            // The region's store admits against its enforced limit: base + grants it has heard of.
            const region = regions[step.region]
            // Units 0 fills the region up to what its store would admit.
            const units = step.units === 0 ? enforcedLimit(limit, REGIONS, region.name, region.fields) - region.count : step.units
            if (units > 0 && region.count + units <= enforcedLimit(limit, REGIONS, region.name, region.fields)) {
              region.count += units
              region.admitted += units
              fold(region.fields, region.name, 'p', 'u', region.admitted)
            }
          } else if (step.kind === 'give') {
            const region = regions[step.region]
            const free = enforcedLimit(limit, REGIONS, region.name, region.fields) - region.count
            // Every other region asks for as much as it has asked for so far: any amounts, in any order.
            const wants = new Map(REGIONS.filter((peer) => peer !== region.name).map((peer) => [peer, demandOf(region.fields, peer)]))
            const gives = planGives(free - step.free, wants)
            for (const [peer, units] of gives) {
              // Charged first, atomically with decisions; counted as given only if the charge went in.
              if (region.count + units > enforcedLimit(limit, REGIONS, region.name, region.fields)) break
              region.count += units
              region.cumulativeGiven.set(peer, (region.cumulativeGiven.get(peer) ?? 0) + units)
              fold(region.fields, region.name, 'p', `g|${peer}`, region.cumulativeGiven.get(peer)!)
            }
          } else {
            const from = regions[step.from]
            const shared = new Map([...from.fields].filter(([field]) => !field.startsWith('o|')))
            const to = regions[step.to]
            for (const [field, value] of mergeFields(to.fields, shared)) to.fields.set(field, value)
          }
          const admitted = regions.reduce((sum, region) => sum + region.admitted, 0)
          assert.ok(admitted <= limit, `admitted ${admitted} > limit ${limit}`)
          // The proof's two steps: each region admits within what it holds (its enforced limit minus
          // what it handed away), and what the regions hold never sums above the limit.
          let held = 0
          for (const region of regions) {
            const given = [...region.cumulativeGiven.values()].reduce((a, b) => a + b, 0)
            const holds = enforcedLimit(limit, REGIONS, region.name, region.fields) - given
            assert.ok(region.admitted <= holds, `${region.name} admitted ${region.admitted} > holds ${holds}`)
            held += holds
          }
          assert.ok(held <= limit, `held ${held} > limit ${limit}`)
        }
      }),
      { numRuns: 1000 },
    )
  })

  it('units move to the region that needs them: an idle region gives all it will not use', () => {
    const limit = 1000
    const fields = new Map<string, number>([
      [usedField('eu'), 333],
      [demandField('eu'), 900],
      [usedField('us'), 0],
    ])
    const gives = planGives(333, new Map([['eu', 567]]))
    assert.deepEqual([...gives], [['eu', 333]])
    fields.set(grantField('us', 'eu'), 333)
    assert.equal(allotment(limit, REGIONS, 'eu', fields), 666)
    assert.equal(allotment(limit, REGIONS, 'us', fields), 0)
  })
})
