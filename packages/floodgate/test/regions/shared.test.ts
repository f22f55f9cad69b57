// Shared mode on real regions (a redis-server each, linked through 50 ms proxies): admitted across
// regions stays within limit + the documented bound under load, both sides serve through a
// partition, and after the heal every region holds the same counts, with none lost or doubled.

import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { createPolicies, createPolicy, type PolicyOptions } from '../../src/core/policy.js'
import { usageKey } from '../../src/regions/usage-script.js'
import { windowOf } from '../../src/regions/region-policy.js'
import { burst, startRegions, usageFields, type TestRegions } from './support.js'

const LIMIT = 1000
/** Decisions per region per round; a round is one sync interval (every region ticks once after it). */
const PER_ROUND = 40
const PERIOD = '1h'
const HOUR = 3_600_000
// A window's start, plus a little: no round crosses a window's end.
let now = Math.floor(Date.now() / HOUR) * HOUR + 1_000
const clock = () => now

describe('shared: two regions, one fixed-window limit', () => {
  let net: TestRegions
  const policy: PolicyOptions = { name: 'api', algorithm: 'fixed-window', limit: LIMIT, period: PERIOD, regions: 'shared' }

  before(async () => {
    net = await startRegions(['eu', 'us'], [policy], clock)
  })
  after(async () => net.stop())

  for (const algorithm of ['fixed-window', 'sliding-window', 'gcra', 'token-bucket'] as const) {
    it(`${algorithm}: admits at most limit + (regions − 1) × rate × 2 intervals under load, and at least the limit`, async () => {
      const [eu, us] = net.regions
      const policies = createPolicies([{ name: algorithm, algorithm, limit: LIMIT, period: PERIOD, regions: 'shared' }])
      let admitted = 0
      let rounds = 0
      // Until both regions deny a whole round: the limit is spent as each sees it.
      for (;;) {
        const [a, b] = await Promise.all([burst(eu, algorithm, PER_ROUND, policies), burst(us, algorithm, PER_ROUND, policies)])
        admitted += a + b
        rounds++
        now += 100
        await net.tickAll()
        if (a + b === 0 || rounds > 200) break
      }
      // docs/regions.md: over-admission ≤ (R − 1) × ρ × λ, here ρ = PER_ROUND a round and λ = 2
      // rounds (a unit admitted in round n is in the other region's copy for round n + 2).
      const bound = (2 - 1) * PER_ROUND * 2
      console.log(`shared ${algorithm}: admitted ${admitted} of ${LIMIT} in ${rounds} rounds; over ${admitted - LIMIT}, bound ${bound}`)
      assert.ok(admitted <= LIMIT + bound, `admitted ${admitted} > ${LIMIT} + ${bound}`)
      // A sliding window also counts the previous window's weight, which is 0 here; buckets refill
      // by less than a unit over the test's clock: so every algorithm admits at least the limit.
      assert.ok(admitted >= LIMIT, `admitted ${admitted} < ${LIMIT}: shared mode must not under-admit`)
    })
  }

  it('serves on both sides of a partition, each within the limit minus what it heard; converges after the heal', async () => {
    const [eu, us] = net.regions
    const key = 'partitioned'
    const admitted = { eu: 0, us: 0 }
    // Before: both regions use some and hear of each other.
    for (let round = 0; round < 3; round++) {
      admitted.eu += await burst(eu, key, 50)
      admitted.us += await burst(us, key, 50)
      now += 100
      await net.tickAll()
    }
    await net.tickAll()
    const heardBefore = { eu: admitted.us, us: admitted.eu }

    net.partition('eu', 'us')
    const during = { eu: 0, us: 0 }
    for (let round = 0; round < 30; round++) {
      during.eu += await burst(eu, key, 40)
      during.us += await burst(us, key, 40)
      now += 100
      await net.tickAll()
    }
    console.log(`shared partition: before eu ${admitted.eu} us ${admitted.us}; during eu ${during.eu} us ${during.us}`)
    const status = eu.sync.status()
    assert.deepEqual(status.degraded, ['us'])
    assert.ok(during.eu > 0 && during.us > 0, 'both sides keep serving')
    // Each side admits up to the limit minus what it had heard of the other: no more.
    assert.ok(admitted.eu + during.eu <= LIMIT - heardBefore.eu, `eu ${admitted.eu + during.eu}`)
    assert.ok(admitted.us + during.us <= LIMIT - heardBefore.us, `us ${admitted.us + during.us}`)
    admitted.eu += during.eu
    admitted.us += during.us

    net.heal('eu', 'us')
    // Two ticks after the link is back (two sync intervals), every region holds the same counts.
    // The clients reconnect in the background; from the first tick that reaches the peer, two
    // ticks (two sync intervals) bring every region to the same counts.
    await net.connected()
    await net.tickAll()
    await net.tickAll()
    const hash = usageKey('fg:', key, createPolicy(policy), windowOf(now, HOUR))
    const [inEu, inUs] = await Promise.all([usageFields(eu, hash), usageFields(us, hash)])
    assert.deepEqual(inEu, inUs)
    assert.equal(inEu['u|eu'], admitted.eu, 'no unit of eu lost or doubled')
    assert.equal(inEu['u|us'], admitted.us, 'no unit of us lost or doubled')
    assert.deepEqual(eu.sync.status().degraded, [])
    // And from now on both deny: each has heard the other's use.
    assert.equal(await burst(eu, key, 5), 0)
    assert.equal(await burst(us, key, 5), 0)
  })
})
