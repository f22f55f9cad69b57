// TLS to memcached from the service: --memcache-tls* and upstream's MEMCACHE_TLS*, on a real memcached -Z that requires
// client certificates (ssl_verify_mode=2), certificates made by openssl here; the store, the SRV lookup and --compat-keys.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { startMemcached, type MemcachedProcess } from '../../../floodgate/test/support/memcached-server.js'
import { readSettings } from '../../src/service/settings.js'
import { readUpstreamEnvironment } from '../../src/service/upstream-env.js'
import { makeTestCerts, type TestCerts } from './redis-tls-certs.js'
import { postJson, startTestService, type TestService } from './helpers.js'
import { startSrvDnsServer, type SrvDnsServer } from './srv-dns.js'

// Hour limits: no window edge in reach of a test.
const RULES = `
domain: tls
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 2 }
`

/** One /json decision for `user=<value>`: its overall code, or ERROR when the store was not reached. */
async function decide(service: { httpUrl: string }, value: string): Promise<string> {
  const { body } = await postJson(`${service.httpUrl}/json`, { domain: 'tls', descriptors: [{ entries: [{ key: 'user', value }] }] })
  return body.overallCode ?? 'ERROR'
}

let certs: TestCerts
let memcached: MemcachedProcess

before(async () => {
  certs = makeTestCerts()
  const files = `ssl_chain_cert=${certs.server.cert},ssl_key=${certs.server.key},ssl_ca_cert=${certs.ca},ssl_verify_mode=2`
  memcached = await startMemcached(undefined, ['-Z', '-o', files])
})

after(async () => {
  await memcached?.stop()
  certs?.remove()
})

const tlsFlags = () => ['--memcache-tls', '--memcache-tls-ca', certs.ca, '--memcache-tls-cert', certs.client.cert]
const withKey = () => [...tlsFlags(), '--memcache-tls-key', certs.client.key]

describe('settings', () => {
  it("upstream's MEMCACHE_TLS and its files become the store's TLS options, the CA besides the system's", () => {
    const settings = readSettings(['r.yaml'], {
      ...{ BACKEND_TYPE: 'memcache', MEMCACHE_HOST_PORT: memcached.address, MEMCACHE_TLS: 'true' },
      ...{ MEMCACHE_TLS_CACERT: certs.ca, MEMCACHE_TLS_CLIENT_CERT: certs.client.cert, MEMCACHE_TLS_CLIENT_KEY: certs.client.key },
      MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION: 'true',
    })
    assert.equal(settings.store.kind, 'memcached')
    const tls = settings.store.kind === 'memcached' ? settings.store.tls : undefined
    assert.ok(tls !== undefined)
    const ca = tls.ca as string[]
    assert.equal(ca.at(-1), readFileSync(certs.ca, 'utf8'))
    assert.ok(ca.length > 1, "the system's roots are kept, as upstream keeps its system pool")
    assert.equal(tls.cert, readFileSync(certs.client.cert, 'utf8'))
    assert.equal(tls.key, readFileSync(certs.client.key, 'utf8'))
    assert.equal(typeof tls.checkServerIdentity, 'function')
    const plain = readSettings(['r.yaml'], { BACKEND_TYPE: 'memcache', MEMCACHE_HOST_PORT: 'm:1', MEMCACHE_TLS: 'false' })
    assert.equal(plain.store.kind === 'memcached' && plain.store.tls, undefined)
  })

  it('refuses what does not go together, saying why; notes files upstream would ignore', () => {
    const cases: [string[], RegExp][] = [
      [['--memcached', 'm:1', ...tlsFlags()], /give --memcache-tls-cert and --memcache-tls-key together/],
      [['--memcache-tls'], /applies to memcached: add --memcached or --memcache-srv/],
      [['--memcached', 'm:1', '--memcache-tls-ca', certs.ca], /only applies with --memcache-tls/],
      [['--memcached', 'm:1', '--memcache-tls', '--memcache-tls-ca', '/nonexistent/ca.pem'], /--memcache-tls-ca .*cannot read/],
    ]
    for (const [args, message] of cases) assert.throws(() => readSettings(['--config', 'r', ...args], {}), message, args.join(' '))
    const { notes } = readUpstreamEnvironment({ BACKEND_TYPE: 'memcache', MEMCACHE_HOST_PORT: 'm:1', MEMCACHE_TLS_CACERT: certs.ca })
    assert.ok(
      notes.some((note) => note.startsWith('MEMCACHE_TLS_CACERT is ignored without MEMCACHE_TLS=true')),
      notes.join('\n'),
    )
  })
})

describe('a memcached that requires TLS and a client certificate', () => {
  it('with the CA and a client certificate the service decides through it; without the certificate, nothing is admitted', async () => {
    const service = await startTestService(RULES, ['--memcached', memcached.address, ...withKey()])
    try {
      assert.deepEqual([await decide(service, 'a'), await decide(service, 'a'), await decide(service, 'a')], ['OK', 'OK', 'OVER_LIMIT'])
    } finally {
      await service.stop()
    }
    const without = await startTestService(RULES, ['--memcached', memcached.address, '--memcache-tls', '--memcache-tls-ca', certs.ca])
    try {
      assert.equal(await decide(without, 'b'), 'ERROR')
    } finally {
      await without.stop()
    }
  })

  it("--compat-keys envoy: upstream's counter reaches memcached over TLS too, and counts", async () => {
    const service = await startTestService(RULES, ['--memcached', memcached.address, ...withKey(), '--compat-keys', 'envoy'])
    try {
      assert.deepEqual([await decide(service, 'c'), await decide(service, 'c'), await decide(service, 'c')], ['OK', 'OK', 'OVER_LIMIT'])
    } finally {
      await service.stop()
    }
  })

  describe('servers from an SRV record', () => {
    const NAME = '_memcache._tcp.tls.test'
    let dns: SrvDnsServer
    let service: TestService | undefined
    before(async () => {
      dns = await startSrvDnsServer()
      dns.set(NAME, [{ target: memcached.host, port: memcached.port }])
    })
    after(async () => {
      await service?.stop()
      await dns?.close()
    })

    it('the servers looked up are reached over TLS', async () => {
      service = await startTestService(RULES, ['--memcache-srv', NAME, '--dns-server', dns.address, ...withKey()])
      assert.deepEqual([await decide(service, 'd'), await decide(service, 'd'), await decide(service, 'd')], ['OK', 'OK', 'OVER_LIMIT'])
    })
  })
})
