// The service with its default store timeout on a slow, healthy memcached (issue 26 §3): every round
// trip through the link takes longer than the old fixed 100 ms default, and the store still decides
// every request (none is answered fallback-open).

import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { startProxy, type LinkProxy } from '../../../floodgate/test/regions/support.js'
import { startMemcached, type MemcachedProcess } from '../../../floodgate/test/support/memcached-server.js'
import { checkBody, postJson, startTestService, type TestService } from './helpers.js'

// Each way: a round trip of 120 ms, above the old 100 ms default, however fast the machine.
const LINK_MS = 60

describe('service on a slow memcached, default --store-timeout', () => {
  let server: MemcachedProcess
  let proxy: LinkProxy
  let service: TestService
  before(async () => {
    server = await startMemcached()
    proxy = await startProxy(server.port, LINK_MS)
    service = await startTestService(undefined, ['--memcached', `127.0.0.1:${new URL(proxy.url).port}`, '--redis-prefix', 'slow:'])
  })
  after(async () => {
    await service?.stop()
    await proxy?.close()
    await server?.stop()
  })

  it('decides with the store, not fallback-open, when every answer takes longer than 100 ms', async () => {
    const sources: string[] = []
    const statuses: number[] = []
    // Several at once, as a loaded service sees them, and then one by one.
    const together = await Promise.all(
      Array.from({ length: 4 }, (_, i) => postJson(`${service.httpUrl}/v1/check`, checkBody('test', [{ user: `slow-${i}` }]))),
    )
    for (const answer of together) sources.push(answer.body.results[0].source)
    for (let i = 0; i < 5; i++) {
      const answer = await postJson(`${service.httpUrl}/v1/check`, checkBody('test', [{ user: 'slow-alice' }]))
      statuses.push(answer.status)
      sources.push(answer.body.results[0].source)
    }
    assert.deepEqual(
      sources.filter((source) => source !== 'store' && source !== 'deny-cache'),
      [],
      `sources: ${sources.join(', ')}`,
    )
    // The limit (3 per user in the test rules) is the store's.
    assert.deepEqual(statuses, [200, 200, 200, 429, 429])
  })
})
