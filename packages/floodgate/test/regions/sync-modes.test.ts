// Regions with the other sync modes, on real regions (a redis-server each, linked through 50 ms
// proxies): split with lease and auto never admits past the limit and still follows moving
// demand; shared with lease and with write-back stays within the combined bounds of
// docs/regions.md; split with write-back is refused with its reason.

import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { createPolicies, createPolicy, type Policy, type PolicyOptions } from '../../src/core/policy.js'
import { usageKey } from '../../src/regions/usage-script.js'
import { windowOf } from '../../src/regions/region-policy.js'
import { burst, startRegions, usageFields, type TestRegion, type TestRegions } from './support.js'

const LIMIT = 1000
const HOUR = 3_600_000
/** Decisions per region per round; a round is one sync interval (every region ticks once after it). */
const PER_ROUND = 40
const LEASE_MAX = 20
let now = Math.floor(Date.now() / HOUR) * HOUR + 1_000
const clock = () => now

describe('regions with lease, auto and write-back', () => {
  let net: TestRegions

  before(async () => {
    net = await startRegions(['eu', 'us'], [{ name: 'unused', algorithm: 'fixed-window', limit: 1, period: '1h' }], clock)
  })
  after(async () => net.stop())

  /** One round: the decisions of each region at once, write-back's units flushed, then one tick everywhere. */
  async function round(policies: readonly Policy[], key: string, demand: { eu: number; us: number }): Promise<{ eu: number; us: number }> {
    const [eu, us] = net.regions
    const [a, b] = await Promise.all([burst(eu, key, demand.eu, policies), burst(us, key, demand.us, policies)])
    await Promise.all(net.regions.map((region: TestRegion) => region.limiter.flush()))
    now += 100
    await net.tickAll()
    return { eu: a, us: b }
  }

  for (const sync of ['lease', 'auto'] as const) {
    for (const algorithm of ['fixed-window', 'sliding-window'] as const) {
      it(`split, ${sync}, ${algorithm}: ≤ limit at every step, and ≥ 90% of it when demand moves from us to eu`, async () => {
        const options = { algorithm, limit: LIMIT, period: '1h', regions: 'split', sync, leaseMax: LEASE_MAX } as const
        const policies = createPolicies([{ name: `split-${sync}-${algorithm}`, ...options, ...(sync === 'auto' ? { hotRate: 10 } : {}) }])
        const key = `moving-${sync}-${algorithm}`
        let admitted = 0
        for (let i = 0; i < 6; i++) {
          const got = await round(policies, key, { eu: 0, us: 50 })
          admitted += got.eu + got.us
          assert.ok(admitted <= LIMIT, `admitted ${admitted} > ${LIMIT}`)
        }
        let rounds = 0
        let quiet = 0
        while (rounds < 100 && quiet < 8) {
          const got = await round(policies, key, { eu: 50, us: 0 })
          admitted += got.eu + got.us
          rounds++
          quiet = got.eu === 0 ? quiet + 1 : 0
          assert.ok(admitted <= LIMIT, `admitted ${admitted} > ${LIMIT} after round ${rounds}`)
        }
        const given = net.regions[1].sync.status().counters.unitsGiven
        console.log(`split ${sync} ${algorithm}: admitted ${admitted} of ${LIMIT} after demand moved; given by us ${given}`)
        assert.ok(admitted >= 0.9 * LIMIT, `admitted ${admitted} < 90% of ${LIMIT}`)
      })
    }
  }

  // docs/regions.md, shared with lease: a grant counts as the region's use when it is taken, so a
  // region's use unheard by the others is its admissions of the last λ plus the blocks its N
  // instances hold ahead of use: over ≤ Σ_others (ρ × λ + N × leaseMax). Here ρ = PER_ROUND a
  // round, λ = 2 rounds (as in shared.test.ts), N = 1.
  for (const algorithm of ['fixed-window', 'sliding-window', 'gcra', 'token-bucket'] as const) {
    it(`shared, lease, ${algorithm}: ≤ limit + ρ × λ + N × leaseMax under load`, async () => {
      const policies = createPolicies([
        { name: `shared-lease-${algorithm}`, algorithm, limit: LIMIT, period: '1h', regions: 'shared', sync: 'lease', leaseMax: LEASE_MAX },
      ])
      const { admitted, rounds } = await untilDenied(policies, `lease-${algorithm}`)
      const bound = (2 - 1) * (PER_ROUND * 2 + 1 * LEASE_MAX)
      console.log(
        `shared lease ${algorithm}: admitted ${admitted} of ${LIMIT} in ${rounds} rounds; over ${admitted - LIMIT}, bound ${bound}`,
      )
      assert.ok(admitted <= LIMIT + bound, `admitted ${admitted} > ${LIMIT} + ${bound}`)
      // Units returned unused stay counted as used for the others until the window ends.
      assert.ok(admitted >= LIMIT - 2 * LEASE_MAX, `admitted ${admitted}: more under-admission than the blocks given back`)
    })
  }

  // docs/regions.md, shared with write-back: the region's own write-back bound (N·c + the staleness
  // of its copies within the region) adds to the replication bound, whose lag grows by two flush
  // intervals (a unit waits for its flush before the region counts it, and the others' use reaches
  // an instance's copy at its next flush answer): over ≤ Σ_r N_r·c + (R − 1) × ρ × (λ + 2·flushMs).
  // Here N = 1, c = 1, ρ = PER_ROUND a round, λ = 2 rounds, one flush a round.
  for (const algorithm of ['fixed-window', 'sliding-window', 'gcra', 'token-bucket'] as const) {
    it(`shared, write-back, ${algorithm}: ≤ limit + N·c + ρ × (λ + 2 flushes) under load, and at least the limit`, async () => {
      const policies = createPolicies([
        { name: `shared-wb-${algorithm}`, algorithm, limit: LIMIT, period: '1h', regions: 'shared', sync: 'write-back', flushMs: '10m' },
      ])
      const { admitted, rounds } = await untilDenied(policies, `wb-${algorithm}`)
      const bound = 2 * 1 * 1 + (2 - 1) * PER_ROUND * (2 + 2 * 1)
      console.log(
        `shared write-back ${algorithm}: admitted ${admitted} of ${LIMIT} in ${rounds} rounds; over ${admitted - LIMIT}, bound ${bound}`,
      )
      assert.ok(admitted <= LIMIT + bound, `admitted ${admitted} > ${LIMIT} + ${bound}`)
      assert.ok(admitted >= LIMIT, `admitted ${admitted} < ${LIMIT}: shared mode must not under-admit`)
    })
  }

  it('shared, write-back: a partition keeps both sides within the limit less what each heard; counts converge after', async () => {
    const policy: PolicyOptions = {
      name: 'wb-partition',
      algorithm: 'fixed-window',
      limit: LIMIT,
      period: '1h',
      regions: 'shared',
      sync: 'write-back',
      flushMs: '10m',
    }
    const policies = createPolicies([policy])
    const key = 'wb-partitioned'
    const admitted = { eu: 0, us: 0 }
    for (let i = 0; i < 3; i++) {
      const got = await round(policies, key, { eu: 50, us: 50 })
      admitted.eu += got.eu
      admitted.us += got.us
    }
    await round(policies, key, { eu: 0, us: 0 })
    const heard = { eu: admitted.us, us: admitted.eu }
    net.partition('eu', 'us')
    for (let i = 0; i < 20; i++) {
      const got = await round(policies, key, { eu: 40, us: 40 })
      admitted.eu += got.eu
      admitted.us += got.us
    }
    console.log(`shared write-back partition: eu ${admitted.eu} us ${admitted.us}`)
    assert.ok(admitted.eu <= LIMIT - heard.eu && admitted.us <= LIMIT - heard.us)
    assert.ok(admitted.eu > 300 && admitted.us > 300, 'both sides keep serving')
    net.heal('eu', 'us')
    await net.connected()
    await net.tickAll()
    await net.tickAll()
    const [eu, us] = net.regions
    const hash = usageKey('fg:', key, createPolicy(policy), windowOf(now, HOUR))
    const [inEu, inUs] = await Promise.all([usageFields(eu, hash), usageFields(us, hash)])
    assert.deepEqual(inEu, inUs)
    assert.equal(inEu['u|eu'], admitted.eu, 'no unit of eu lost or doubled')
    assert.equal(inEu['u|us'], admitted.us, 'no unit of us lost or doubled')
  })

  it('split with write-back is refused, naming the field and the reason', () => {
    assert.throws(
      () => createPolicy({ name: 'x', algorithm: 'fixed-window', limit: 10, period: '1m', regions: 'split', sync: 'write-back' }),
      (error: Error) => /\.regions/.test(error.message) && /zero over-admission/.test(error.message) && /lease/.test(error.message),
    )
    for (const sync of ['lease', 'auto', 'write-back'] as const) {
      assert.doesNotThrow(() => createPolicy({ name: 'x', algorithm: 'gcra', limit: 10, period: '1m', regions: 'shared', sync }))
    }
  })

  // Until both regions deny a whole round: the limit is spent as each sees it.
  async function untilDenied(policies: readonly Policy[], key: string): Promise<{ admitted: number; rounds: number }> {
    let admitted = 0
    let rounds = 0
    let quiet = 0
    while (rounds < 200 && quiet < 3) {
      const got = await round(policies, key, { eu: PER_ROUND, us: PER_ROUND })
      admitted += got.eu + got.us
      rounds++
      quiet = got.eu + got.us === 0 ? quiet + 1 : 0
    }
    return { admitted, rounds }
  }
})
