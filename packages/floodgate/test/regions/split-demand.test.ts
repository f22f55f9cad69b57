// Split mode follows recent demand (real regions: a redis-server each, 50 ms proxies, ticks by hand on an
// injected clock): units handed to a region that then went quiet flow back to where the demand moved
// (issue 27: they stayed stranded until the window ended), and the denials the limiter's deny cache
// answers still count as demand.

import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { createPolicies } from '../../src/core/policy.js'
import { usageKey } from '../../src/regions/usage-script.js'
import { windowOf } from '../../src/regions/region-policy.js'
import { allotment } from '../../src/regions/allotments.js'
import { burst, startRegions, usageFields, type TestRegions } from './support.js'

const LIMIT = 1000
const PERIOD = 600_000
let now = Math.floor(Date.now() / PERIOD) * PERIOD + 1_000
const clock = () => now

describe('split: units flow back from a region that stopped using them', () => {
  let net: TestRegions

  before(async () => {
    net = await startRegions(['ap', 'eu', 'us'], [{ name: 'unused', algorithm: 'fixed-window', limit: 1, period: '1h' }], clock)
  })
  after(async () => net.stop())

  it('us bursts, is handed the idle regions’ units after its burst; the demand moves to ap, which gets them within 15 ticks', async () => {
    const policies = createPolicies([{ name: 'moving', algorithm: 'fixed-window', limit: LIMIT, period: '10m', regions: 'split' }])
    const key = 'stranded'
    const [ap, eu, us] = net.regions
    const tick = async () => {
      now += 100
      await net.tickAll()
    }
    let admitted = await burst(us, key, 1500, policies)
    assert.equal(admitted, 333, 'us admits its base share of the burst')
    // The burst is over before the idle regions hear of it; their units reach us afterwards.
    for (let i = 0; i < 10; i++) await tick()
    const hash = usageKey('fg:', key, policies[0], windowOf(now, PERIOD * 1))
    const fields = new Map(Object.entries(await usageFields(us, hash)))
    const held = allotment(LIMIT, net.regions.map((region) => region.name).sort(), 'us', fields)
    assert.ok(held >= 600, `us was handed the idle regions' units (holds ${held})`)

    let ticks = 0
    while (admitted < 0.9 * LIMIT && ticks < 40) {
      admitted += await burst(ap, key, 150, policies)
      assert.ok(admitted <= LIMIT, `admitted ${admitted} > ${LIMIT} after ${ticks} ticks`)
      await tick()
      ticks++
    }
    // Later rounds must not push the total past the limit either.
    for (let i = 0; i < 5; i++) {
      admitted += await burst(ap, key, 150, policies)
      await tick()
    }
    console.log(`split flow-back: 90% of the limit ${ticks} ticks after the move; admitted ${admitted}`)
    assert.ok(admitted <= LIMIT, `admitted ${admitted} > ${LIMIT}`)
    assert.ok(ticks <= 15, `90% of the limit took ${ticks} ticks after the move (at most 15)`)
    assert.ok(eu.sync.status().counters.unitsGiven > 0 && ap.sync.status().counters.unitsGiven > 0)
  })
})

describe('split: the deny cache’s answers are demand', () => {
  let net: TestRegions

  before(async () => {
    net = await startRegions(['eu', 'us'], [{ name: 'unused', algorithm: 'fixed-window', limit: 1, period: '1h' }], clock)
  })
  after(async () => net.stop())

  it('every denial counts in the region’s demand, also those the deny cache answered without the store', async () => {
    const policies = createPolicies([{ name: 'cached', algorithm: 'fixed-window', limit: 20, period: '10m', regions: 'split' }])
    const key = 'denied-often'
    const [eu] = net.regions
    const sources = new Map<string, number>()
    // One at a time, on a clock that stands still: after the first denial the deny cache answers.
    for (let i = 0; i < 70; i++) {
      const decision = await eu.limiter.limit(key, { policies })
      sources.set(decision.allowed ? 'allowed' : decision.source, (sources.get(decision.allowed ? 'allowed' : decision.source) ?? 0) + 1)
    }
    assert.equal(sources.get('allowed'), 10, 'eu admits its base share')
    assert.ok((sources.get('deny-cache') ?? 0) >= 50, `the deny cache answered ${sources.get('deny-cache')} of 60 denials`)
    await net.tickAll()
    const fields = await usageFields(eu, usageKey('fg:', key, policies[0], windowOf(now, PERIOD)))
    assert.equal(fields['d|eu'], 70, 'demand counts every request, whoever answered it')
    assert.equal(fields['u|eu'], 10)
  })
})
