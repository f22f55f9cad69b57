// Split mode on real regions (a redis-server each, linked through 50 ms proxies): never more than the
// limit across regions, at every step, also while units move and across a partition; and when demand
// moves from one region to another, the allotments follow it and at least 90% of the limit is used.

import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { createPolicies, type Policy } from '../../src/core/policy.js'
import { usageKey } from '../../src/regions/usage-script.js'
import { windowOf } from '../../src/regions/region-policy.js'
import { burst, startRegions, usageFields, type TestRegions } from './support.js'

const LIMIT = 1000
const HOUR = 3_600_000
let now = Math.floor(Date.now() / HOUR) * HOUR + 1_000
const clock = () => now

describe('split: two regions, one limit in allotments', () => {
  let net: TestRegions

  before(async () => {
    net = await startRegions(['eu', 'us'], [{ name: 'unused', algorithm: 'fixed-window', limit: 1, period: '1h' }], clock)
  })
  after(async () => net.stop())

  /** One round: `perRound` decisions in each region that has demand, then one tick everywhere. */
  async function round(policies: readonly Policy[], key: string, demand: { eu: number; us: number }): Promise<{ eu: number; us: number }> {
    const [eu, us] = net.regions
    const [a, b] = await Promise.all([burst(eu, key, demand.eu, policies), burst(us, key, demand.us, policies)])
    now += 100
    await net.tickAll()
    return { eu: a, us: b }
  }

  for (const algorithm of ['fixed-window', 'sliding-window'] as const) {
    it(`${algorithm}: ≤ limit at every step, and ≥ 90% of it when demand moves from us to eu`, async () => {
      const policies = createPolicies([{ name: `split-${algorithm}`, algorithm, limit: LIMIT, period: '1h', regions: 'split' }])
      const key = `moving-${algorithm}`
      let admitted = 0
      // us uses 300 of its 500, then its clients go to eu.
      for (let i = 0; i < 6; i++) {
        const got = await round(policies, key, { eu: 0, us: 50 })
        admitted += got.eu + got.us
        assert.ok(admitted <= LIMIT)
      }
      const [eu, us] = net.regions
      // eu, idle, may hand us units while us runs short, up to us's last asks (kept 3 intervals);
      // after those, with the demand eu's own, it gives nothing.
      let givenByEu = Infinity
      let rounds = 0
      let quiet = 0
      while (rounds < 80 && quiet < 5) {
        const got = await round(policies, key, { eu: 50, us: 0 })
        admitted += got.eu + got.us
        rounds++
        if (rounds === 3) givenByEu = eu.sync.status().counters.unitsGiven
        quiet = got.eu === 0 ? quiet + 1 : 0
        assert.ok(admitted <= LIMIT, `admitted ${admitted} > ${LIMIT} after round ${rounds}`)
      }
      const share = ((100 * admitted) / LIMIT).toFixed(1)
      const given = us.sync.status().counters.unitsGiven
      console.log(`split ${algorithm}: admitted ${admitted} of ${LIMIT} (${share}%) after demand moved; given by us ${given}`)
      assert.ok(admitted >= 0.9 * LIMIT, `admitted ${admitted} < 90% of ${LIMIT}`)
      assert.equal(eu.sync.status().counters.unitsGiven, givenByEu)
    })
  }

  it('a partition: both sides serve within their last allotment, never above the limit together; converge after the heal', async () => {
    const policies = createPolicies([{ name: 'split-partition', algorithm: 'fixed-window', limit: LIMIT, period: '1h', regions: 'split' }])
    const key = 'partitioned'
    const admitted = { eu: 0, us: 0 }
    // eu runs short and gets units from us, then the link goes.
    for (let i = 0; i < 14; i++) {
      const got = await round(policies, key, { eu: 50, us: 0 })
      admitted.eu += got.eu
      admitted.us += got.us
    }
    net.partition('eu', 'us')
    const during = { eu: 0, us: 0 }
    for (let i = 0; i < 20; i++) {
      const got = await round(policies, key, { eu: 50, us: 50 })
      during.eu += got.eu
      during.us += got.us
      assert.ok(admitted.eu + admitted.us + during.eu + during.us <= LIMIT)
    }
    console.log(`split partition: before eu ${admitted.eu} us ${admitted.us}; during eu ${during.eu} us ${during.us}`)
    const [eu, us] = net.regions
    assert.deepEqual(eu.sync.status().degraded, ['us'])
    assert.deepEqual(us.sync.status().degraded, ['eu'])
    assert.ok(during.us > 0, 'us keeps serving from what it kept')
    admitted.eu += during.eu
    admitted.us += during.us

    net.heal('eu', 'us')
    await net.connected()
    await net.tickAll()
    const hash = usageKey('fg:', key, policies[0], windowOf(now, HOUR))
    const [inEu, inUs] = await Promise.all([usageFields(eu, hash), usageFields(us, hash)])
    assert.deepEqual(inEu, inUs)
    assert.equal(inEu['u|eu'], admitted.eu)
    assert.equal(inEu['u|us'], admitted.us)
    assert.ok(inEu['u|eu'] + inEu['u|us'] <= LIMIT)
  })
})
