// --compat-keys envoy together with --region: upstream-format rules count under upstream's keys in
// the region's own Redis, Floodgate's rules with `regions` (also on leases and write-back) limit
// across regions, and /readyz and /metrics see the peers through the compat wrapper.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { Redis } from 'ioredis'
import type { RedisProcess } from '../../../floodgate/test/support/redis-server.js'
import type { LinkProxy } from '../../../floodgate/test/regions/support.js'
import { checkBody, postJson, scrape, type TestService } from './helpers.js'
import { eventually, readyz, startTwoRegions, type TwoRegions } from './regions-helpers.js'

const RULES = `
domain: mig
descriptors:
  - key: user
    rate_limit: { unit: day, requests_per_unit: 5 }
  - key: tenant
    limits:
      - { name: tenant-hourly, algorithm: fixed-window, limit: 10, period: 1h, regions: shared }
  - key: leased
    limits:
      - { name: leased-hourly, algorithm: fixed-window, limit: 10, period: 1h, regions: split, sync: lease, leaseMax: 2 }
`

describe('floodgate serve with --compat-keys envoy and --region', () => {
  let redis: RedisProcess[]
  let links: LinkProxy[]
  let eu: TestService
  let us: TestService
  let regions: TwoRegions

  before(async () => {
    regions = await startTwoRegions(RULES, { latencyMs: 20, flags: ['--compat-keys', 'envoy'] })
    ;({ redis, links, eu, us } = regions)
  })
  after(async () => {
    await regions?.stop()
  })

  it('is ready once both regions hear each other, and exports the links in /metrics', async () => {
    await eventually(async () => (await readyz(eu)).status === 'ready' && (await readyz(us)).status === 'ready', 'both ready')
    await postJson(`${eu.httpUrl}/v1/check`, checkBody('mig', [{ tenant: 'warm' }]))
    await eventually(async () => ((await scrape(eu.httpUrl)).get('floodgate_region_deltas_sent_total{peer="us"}') ?? 0) > 0, 'deltas sent')
  })

  it("counts an upstream-format rule under upstream's key in the region's Redis", async () => {
    const { body } = await postJson(`${eu.httpUrl}/json`, { domain: 'mig', descriptors: [{ entries: [{ key: 'user', value: 'ann' }] }] })
    assert.equal(body.overallCode, 'OK')
    const client = new Redis(redis[0].url)
    try {
      const day = Math.floor(Date.now() / 86_400_000) * 86_400
      assert.equal(await client.get(`mig_user_ann_${day}`), '1')
    } finally {
      client.disconnect()
    }
  })

  it('a shared limit counts the hits of both regions', async () => {
    const body = checkBody('mig', [{ tenant: 'acme' }])
    for (let i = 0; i < 5; i++) assert.equal((await postJson(`${eu.httpUrl}/v1/check`, body)).status, 200)
    for (let i = 0; i < 5; i++) assert.equal((await postJson(`${us.httpUrl}/v1/check`, body)).status, 200)
    const peek = checkBody('mig', [{ tenant: 'acme' }], 0)
    const spent = async (service: TestService) => (await postJson(`${service.httpUrl}/v1/check`, peek)).body?.results?.[0]?.remaining === 0
    await eventually(() => spent(eu), 'eu hears us')
    await eventually(() => spent(us), 'us hears eu')
    assert.equal((await postJson(`${eu.httpUrl}/v1/check`, body)).status, 429)
  })

  it('a split rule on leases never admits more than the limit across regions', async () => {
    const body = checkBody('mig', [{ leased: 'acme' }])
    let admitted = 0
    for (let i = 0; i < 12; i++) {
      for (const service of [eu, us]) if ((await postJson(`${service.httpUrl}/v1/check`, body)).status === 200) admitted++
    }
    assert.ok(admitted <= 10, `admitted ${admitted} > 10`)
    assert.ok(admitted >= 8, `admitted ${admitted}: each region should spend most of its allotment of 5`)
  })

  it('a cut link makes /readyz degraded with peer_unreachable; the heal makes it ready again', async () => {
    for (const link of links) link.partition()
    await eventually(async () => {
      const status = await readyz(eu)
      return status.status === 'degraded' && status.reason === 'peer_unreachable'
    }, 'eu degraded')
    for (const link of links) link.heal()
    await eventually(async () => (await readyz(eu)).status === 'ready' && (await readyz(us)).status === 'ready', 'ready after the heal')
  })
})
