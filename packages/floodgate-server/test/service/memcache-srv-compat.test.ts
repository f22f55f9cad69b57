// MEMCACHE_SRV_REFRESH with --compat-keys envoy: when the SRV record changes, upstream's counters move as upstream's
// client moves them (CRC-32 of the key modulo the new server count, over the record's sorted list). Real memcached
// servers, the test's DNS server; where each counter lives is read from memcached itself (lru_crawler metadump).

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { crc32 } from 'node:zlib'
import { keysWithExpiry, startMemcached, type MemcachedProcess } from '../../../floodgate/test/support/memcached-server.js'
import { lookupServers, srvResolver } from '../../src/service/memcache-srv.js'
import { postJson, startTestService, type TestService } from './helpers.js'
import { startSrvDnsServer, type SrvDnsServer } from './srv-dns.js'

const NAME = '_memcache._tcp.compat.test'
const RULES = `
domain: srv
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 5 }
`

describe('--compat-keys envoy with MEMCACHE_SRV_REFRESH', () => {
  let servers: MemcachedProcess[]
  let dns: SrvDnsServer
  let service: TestService
  const target = (server: MemcachedProcess) => ({ target: server.host, port: server.port })

  before(async () => {
    servers = await Promise.all([startMemcached(), startMemcached(), startMemcached()])
    dns = await startSrvDnsServer()
    dns.set(NAME, [target(servers[0]), target(servers[1])])
    const args = ['--memcache-srv', NAME, '--memcache-srv-refresh', '20ms', '--dns-server', dns.address, '--compat-keys', 'envoy']
    service = await startTestService(RULES, [...args, '--store-timeout', '5s'])
  })
  after(async () => {
    await service?.stop()
    await dns?.close()
    await Promise.all((servers ?? []).map((server) => server.stop()))
  })

  const decide = async (user: string): Promise<string> => {
    const { body } = await postJson(`${service.httpUrl}/json`, {
      domain: 'srv',
      descriptors: [{ entries: [{ key: 'user', value: user }] }],
    })
    return body.overallCode ?? 'ERROR'
  }
  const serverCount = async (): Promise<number> => {
    const match = /^floodgate_memcache_servers (\d+)$/m.exec((await service.metrics.expose()).body)
    return match === null ? 0 : Number(match[1])
  }

  /** Asserts every counter of users starting `tag` is on the server upstream's client would pick among `list`. */
  async function placedAsUpstream(tag: string, list: readonly string[]): Promise<number> {
    let seen = 0
    for (const server of servers) {
      for (const key of [...(await keysWithExpiry(server)).keys()].filter((k) => k.startsWith(`srv_user_${tag}`))) {
        assert.equal(list[crc32(key) % list.length], server.address, `${key} is on ${server.address}`)
        seen++
      }
    }
    return seen
  }

  it('counters are placed over the record as it is, and over the new one once it changes', async () => {
    const users = (tag: string) => Array.from({ length: 30 }, (_, i) => `${tag}-${i}`)
    for (const user of users('before')) assert.equal(await decide(user), 'OK')
    const two = await lookupServers(srvResolver([dns.address]), NAME)
    assert.equal(await placedAsUpstream('before', two), 30)

    dns.set(NAME, servers.map(target))
    const deadline = Date.now() + 20_000
    while ((await serverCount()) !== 3 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10))
    assert.equal(await serverCount(), 3)
    const three = await lookupServers(srvResolver([dns.address]), NAME)
    for (const user of users('after')) assert.equal(await decide(user), 'OK')
    assert.equal(await placedAsUpstream('after', three), 30)
  })
})
