// The service on three memcached servers, one killed: /readyz and /metrics name the failing server,
// the other servers' keys keep being decided by the store, and all is well again once it returns.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { startMemcached, type MemcachedProcess } from '../../../floodgate/test/support/memcached-server.js'
import { checkBody, postJson, scrape, startTestService, type TestService } from './helpers.js'

/** Asks `probe` until it answers a value (a state reached), for at most 60 s: a bound on a hang, not a speed test. */
async function until<T>(what: string, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + 60_000
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

describe('service on three memcached servers, one killed', () => {
  let servers: MemcachedProcess[]
  let service: TestService
  before(async () => {
    servers = await Promise.all([startMemcached(), startMemcached(), startMemcached()])
    const list = servers.map((s) => s.address).join(',')
    service = await startTestService(undefined, ['--memcached', list, '--redis-prefix', 'shard:', '--store-timeout', '5s'])
  })
  after(async () => {
    await service?.stop()
    await Promise.all((servers ?? []).map((server) => server.stop()))
  })

  const readyz = async (): Promise<{ status: string; reason: string; shards?: string[] }> =>
    (await fetch(`${service.httpUrl}/readyz`)).json() as Promise<{ status: string; reason: string; shards?: string[] }>
  // Many users: some of them live on each server.
  const sweep = () =>
    Promise.all(Array.from({ length: 60 }, (_, i) => postJson(`${service.httpUrl}/v1/check`, checkBody('test', [{ user: `u${i}` }]))))

  it('/readyz and /metrics name the dead server; they clear when it answers again', async () => {
    await sweep()
    assert.deepEqual(await readyz(), { status: 'ready', reason: 'ok' })
    const victim = servers[2]
    await victim.kill()
    const health = await until('/readyz to name the dead server', async () => {
      await sweep()
      const body = await readyz()
      return body.reason === 'shard_unreachable' ? body : undefined
    })
    assert.deepEqual(health, { status: 'degraded', reason: 'shard_unreachable', shards: [victim.address] })
    const metrics = await scrape(service.httpUrl)
    assert.equal(metrics.get(`floodgate_breaker_open{shard="${victim.address}"}`), 1)
    assert.equal(metrics.get('floodgate_breaker_state'), 1)
    for (const server of servers.slice(0, 2)) assert.equal(metrics.get(`floodgate_breaker_open{shard="${server.address}"}`), undefined)

    await victim.restart()
    // The breaker probes after its cooldown (the service's default, 5 s): wait for the state.
    await until('/readyz to be ready again', async () => {
      await sweep()
      const body = await readyz()
      return body.status === 'ready' ? body : undefined
    })
    const after = await scrape(service.httpUrl)
    assert.equal(after.get(`floodgate_breaker_open{shard="${victim.address}"}`), undefined)
    assert.equal(after.get('floodgate_breaker_state'), 0)
  })
})
