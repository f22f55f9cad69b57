// The usage CRDT: merges commute, associate and are idempotent; replicas that exchange in any order,
// with duplicates and replays, converge to the true totals; the process roll-up counts each unit once.

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import { fold, grantedBy, grantedTo, mergeFields, usedBy, usedByAll, usedByOthers, type UsageFields } from '../../src/regions/crdt.js'

const REGIONS = ['eu', 'us', 'ap']

const arbFields: fc.Arbitrary<Map<string, number>> = fc
  .array(fc.tuple(fc.constantFrom('u|eu', 'u|us', 'u|ap', 'd|eu', 'd|us', 'g|eu|us', 'g|us|ap'), fc.nat(1_000)), { maxLength: 8 })
  .map((pairs) => new Map(pairs))

function same(a: UsageFields, b: UsageFields): boolean {
  return a.size === b.size && [...a].every(([field, value]) => b.get(field) === value)
}

describe('mergeFields', () => {
  it('commutes', () => {
    fc.assert(fc.property(arbFields, arbFields, (a, b) => same(mergeFields(a, b), mergeFields(b, a))))
  })

  it('associates', () => {
    fc.assert(
      fc.property(arbFields, arbFields, arbFields, (a, b, c) => same(mergeFields(mergeFields(a, b), c), mergeFields(a, mergeFields(b, c)))),
    )
  })

  it('is idempotent: a copy merged twice counts once', () => {
    fc.assert(
      fc.property(arbFields, arbFields, (a, b) => same(mergeFields(mergeFields(a, b), b), mergeFields(a, b)) && same(mergeFields(a, a), a)),
    )
  })

  it('never loses a value: the merge is at least each side, field by field', () => {
    fc.assert(
      fc.property(arbFields, arbFields, (a, b) => {
        const merged = mergeFields(a, b)
        return [...a, ...b].every(([field, value]) => merged.get(field)! >= value)
      }),
    )
  })
})

/** One process of one region admitting units, as the process roll-up sees it. */
interface Admission {
  region: number
  process: number
  units: number
}

/** A delivery: replica `to` merges what replica `from` holds (any order, any number of times). */
interface Delivery {
  from: number
  to: number
}

describe('convergence of regions exchanging usage', () => {
  it('after every replica has heard every other, all hold the true totals: nothing lost, nothing doubled', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.record({ region: fc.nat(2), process: fc.nat(1), units: fc.integer({ min: 1, max: 20 }) }),
            fc.record({ from: fc.nat(2), to: fc.nat(2) }),
          ),
          { maxLength: 60 },
        ),
        (events) => {
          // Each region's store, and each process's cumulative counts (sent again and again: replays).
          const stores = REGIONS.map(() => new Map<string, number>())
          const cumulative = REGIONS.map(() => [0, 0])
          const truth = REGIONS.map(() => 0)
          for (const event of events) {
            if ('units' in event) {
              const { region, process, units } = event as Admission
              cumulative[region][process] += units
              truth[region] += units
              // A process writes its cumulative count; a retry writes the same or an older one again.
              fold(stores[region], REGIONS[region], `p${process}`, 'u', cumulative[region][process])
              fold(stores[region], REGIONS[region], `p${process}`, 'u', cumulative[region][process])
              fold(stores[region], REGIONS[region], `p${process}`, 'u', Math.max(0, cumulative[region][process] - units))
            } else {
              const { from, to } = event as Delivery
              const shared = new Map([...stores[from]].filter(([field]) => !field.startsWith('o|')))
              for (const [field, value] of mergeFields(stores[to], shared)) stores[to].set(field, value)
            }
          }
          // Heal: every replica hears every other twice over, in a fixed order.
          for (let round = 0; round < 2; round++) {
            for (let from = 0; from < REGIONS.length; from++) {
              for (let to = 0; to < REGIONS.length; to++) {
                const shared = new Map([...stores[from]].filter(([field]) => !field.startsWith('o|')))
                for (const [field, value] of mergeFields(stores[to], shared)) stores[to].set(field, value)
              }
            }
          }
          const total = truth.reduce((a, b) => a + b, 0)
          for (const store of stores) {
            REGIONS.forEach((region, i) => assert.equal(usedBy(store, region), truth[i], `${region} in every replica`))
            assert.equal(usedByAll(store), total)
            REGIONS.forEach((region, i) => assert.equal(usedByOthers(store, region), total - truth[i]))
          }
        },
      ),
    )
  })

  it('a process made again (an entry dropped from memory, or a restart) starts a new entry and adds to the region', () => {
    const store = new Map<string, number>()
    fold(store, 'eu', 'a.1', 'u', 7)
    fold(store, 'eu', 'a.1', 'u', 5) // late and older: ignored
    fold(store, 'eu', 'a.2', 'u', 3) // the same process, a new entry after a restart
    assert.equal(usedBy(store, 'eu'), 10)
  })

  it('reads grants by giver and by receiver', () => {
    const store = new Map<string, number>()
    fold(store, 'eu', 'a', 'g|us', 4)
    fold(store, 'eu', 'a', 'g|ap', 2)
    fold(store, 'us', 'b', 'g|eu', 1)
    assert.equal(grantedBy(store, 'eu'), 6)
    assert.equal(grantedTo(store, 'us'), 4)
    assert.equal(grantedTo(store, 'eu'), 1)
    assert.equal(grantedTo(store, 'ap'), 2)
  })
})
