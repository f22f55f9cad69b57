// Two `floodgate serve` regions on real redis-servers, linked through a 50 ms proxy: a shared limit
// counts both regions' hits, /metrics shows the links, and /readyz says degraded (not down) while
// the link is cut, and ready again after the heal.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { Redis } from 'ioredis'
import type { LinkProxy } from '../../../floodgate/test/regions/support.js'
import { checkBody, postJson, scrape, type TestService } from './helpers.js'
import { eventually, readyz, startTwoRegions, type TwoRegions } from './regions-helpers.js'

const RULES = `
domain: test
descriptors:
  - key: tenant
    limits:
      - { name: tenant-hourly, algorithm: fixed-window, limit: 10, period: 1h, regions: shared }
  - key: team
    limits:
      - { name: team-hourly, algorithm: fixed-window, limit: 10, period: 1h, regions: split }
`

describe('floodgate serve with --region and --peer', () => {
  let links: LinkProxy[]
  let eu: TestService
  let us: TestService
  let regions: TwoRegions

  before(async () => {
    regions = await startTwoRegions(RULES, { latencyMs: 50 })
    ;({ links, eu, us } = regions)
  })
  after(async () => {
    await regions?.stop()
  })

  it('is ready once both regions hear each other', async () => {
    await eventually(async () => (await readyz(eu)).status === 'ready' && (await readyz(us)).status === 'ready', 'both ready')
  })

  it('a shared limit counts the hits of both regions', async () => {
    const body = checkBody('test', [{ tenant: 'acme' }])
    for (let i = 0; i < 5; i++) assert.equal((await postJson(`${eu.httpUrl}/v1/check`, body)).status, 200)
    for (let i = 0; i < 5; i++) assert.equal((await postJson(`${us.httpUrl}/v1/check`, body)).status, 200)
    // Each region used 5 of 10 itself; once it has heard the other's 5, both deny.
    const peek = checkBody('test', [{ tenant: 'acme' }], 0)
    const spent = async (service: TestService) => (await postJson(`${service.httpUrl}/v1/check`, peek)).body?.results?.[0]?.remaining === 0
    await eventually(() => spent(eu), 'eu hears us')
    await eventually(() => spent(us), 'us hears eu')
    assert.equal((await postJson(`${eu.httpUrl}/v1/check`, body)).status, 429)
    assert.equal((await postJson(`${us.httpUrl}/v1/check`, body)).status, 429)
  })

  it('split: denials the deny cache answers still count as the region’s demand', async () => {
    const body = checkBody('test', [{ team: 'busy' }])
    const asked = 60
    for (let i = 0; i < asked; i++) await postJson(`${eu.httpUrl}/v1/check`, body)
    const client = new Redis(regions.redis[0].url)
    try {
      const demand = async () => {
        let total = 0
        for (const key of await client.keys('*team-hourly*:rg:*')) total += Number((await client.hget(key, 'd|eu')) ?? 0)
        return total
      }
      await eventually(async () => (await demand()) >= asked, `eu's demand counts all ${asked} checks`)
      assert.equal(await demand(), asked)
      const hits = (await scrape(eu.httpUrl)).get('floodgate_deny_cache_hits{rule="test.team"}') ?? 0
      console.log(`split demand through the service: ${asked} checks counted, ${hits} answered by the deny cache`)
    } finally {
      client.disconnect()
    }
  })

  it('exports the links to peers in /metrics', async () => {
    const metrics = await scrape(eu.httpUrl)
    assert.ok((metrics.get('floodgate_region_deltas_sent_total{peer="us"}') ?? 0) > 0)
    assert.ok(metrics.has('floodgate_region_replication_lag_seconds{peer="us"}'))
    assert.ok(metrics.has('floodgate_region_peer_last_heard_seconds{peer="us"}'))
    assert.equal(metrics.get('floodgate_region_peer_up{peer="us"}'), 1)
  })

  it('a cut link makes /readyz degraded with peer_unreachable, decisions go on; the heal makes it ready again', async () => {
    for (const link of links) link.partition()
    await eventually(async () => {
      const status = await readyz(eu)
      return status.status === 'degraded' && status.reason === 'peer_unreachable'
    }, 'eu degraded')
    assert.deepEqual(Object.keys(await readyz(eu)).sort(), ['reason', 'status'])
    const answer = await postJson(`${eu.httpUrl}/v1/check`, checkBody('test', [{ tenant: 'other' }]))
    assert.equal(answer.status, 200)
    assert.equal((await scrape(eu.httpUrl)).get('floodgate_region_peer_up{peer="us"}'), 0)
    for (const link of links) link.heal()
    await eventually(async () => (await readyz(eu)).status === 'ready' && (await readyz(us)).status === 'ready', 'ready after the heal')
  })
})
