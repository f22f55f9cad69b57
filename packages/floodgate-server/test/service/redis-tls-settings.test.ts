// Reading the Redis TLS and unix-socket settings: Floodgate's flags, upstream's variables, and the ioredis options they become.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { rootCertificates } from 'node:tls'
import { readFileSync } from 'node:fs'
import { readSettings } from '../../src/service/settings.js'
import { storeConnectOptions, urlConnectOptions } from '../../src/service/redis-connection.js'
import { makeTestCerts, type TestCerts } from './redis-tls-certs.js'

let certs: TestCerts
before(() => {
  certs = makeTestCerts()
})
after(() => certs?.remove())

const UPSTREAM_TLS = () => ({
  REDIS_TLS_CACERT: certs.ca,
  REDIS_TLS_CLIENT_CERT: certs.client.cert,
  REDIS_TLS_CLIENT_KEY: certs.client.key,
  REDIS_TLS_SKIP_HOSTNAME_VERIFICATION: 'true',
})

describe('Floodgate flags', () => {
  it('read the TLS files at start into the settings', () => {
    const settings = readSettings([
      ...['r', '--redis', 'rediss://h:6380', '--redis-tls-ca', certs.ca, '--redis-tls-cert', certs.client.cert],
      ...['--redis-tls-key', certs.client.key, '--redis-tls-skip-hostname-verification'],
    ])
    assert.deepEqual(settings.redisTls, {
      nodes: false,
      ca: readFileSync(certs.ca, 'utf8'),
      cert: readFileSync(certs.client.cert, 'utf8'),
      key: readFileSync(certs.client.key, 'utf8'),
      skipHostnameVerification: true,
    })
  })

  it('refuse what would not be in force, or cannot be read, with the flag to change', () => {
    const cases: [string[], RegExp][] = [
      [['--redis', 'rediss://h:1', '--redis-tls-cert', 'c.pem'], /--redis-tls-cert .*: give --redis-tls-cert and --redis-tls-key together/],
      [['--redis', 'redis://h:1', '--redis-tls-ca', 'ca.pem'], /--redis-tls-ca .*: only applies to TLS connections: use a rediss:\/\/ URL/],
      [['--redis', 'redis://h:1', '--redis-tls-skip-hostname-verification'], /only applies to TLS connections/],
      [
        ['--redis', 'redis://h:1', '--redis-tls'],
        /--redis-tls .*: applies to --redis-cluster and --redis-sentinel; for --redis, use a rediss:\/\/ URL/,
      ],
      [
        ['--redis', 'rediss://h:1', '--redis-tls-ca', '/no/such/ca.pem'],
        /--redis-tls-ca \/ FLOODGATE_REDIS_TLS_CA: cannot read \/no\/such\/ca\.pem/,
      ],
      [['--redis', 'unix:///'], /expected a socket path after unix:\/\//],
      [['--redis', 'unix:/tmp/r.sock'], /expected a redis:\/\/, rediss:\/\/ or unix:\/\/\/path/],
    ]
    for (const [args, message] of cases) assert.throws(() => readSettings(['r', ...args], {}), message, args.join(' '))
    const notPem = `${certs.dir}/ca.srl`
    assert.throws(() => readSettings(['r', '--redis', 'rediss://h:1', '--redis-tls-ca', notPem], {}), /ca\.srl is not a PEM file/)
  })

  it('a unix:// URL becomes ioredis path options, its query the credentials and database', () => {
    const tls = readSettings(['r', '--redis', 'unix:///run/redis%20x.sock?password=p%40ss&db=2']).redisTls
    assert.deepEqual(urlConnectOptions('unix:///run/redis%20x.sock?password=p%40ss&db=2', tls), {
      redis: { path: '/run/redis x.sock', password: 'p@ss', db: 2 },
    })
    assert.deepEqual(urlConnectOptions('redis://h:1', tls), { url: 'redis://h:1' })
  })

  it('TLS options: the CA beside Node roots, the client pair, and a name check that passes while the chain is still verified', () => {
    const { redisTls } = readSettings([
      ...['r', '--redis-cluster', 'a:7000', '--redis-tls', '--redis-tls-ca', certs.ca],
      ...['--redis-tls-cert', certs.client.cert, '--redis-tls-key', certs.client.key, '--redis-tls-skip-hostname-verification'],
    ])
    const options = urlConnectOptions('rediss://h:1', redisTls).redis?.tls as Record<string, unknown>
    assert.deepEqual(options.ca, [...rootCertificates, readFileSync(certs.ca, 'utf8')])
    assert.equal(options.cert, readFileSync(certs.client.cert, 'utf8'))
    assert.equal(options.rejectUnauthorized, undefined, 'the chain stays verified (Node default)')
    assert.equal((options.checkServerIdentity as () => unknown)(), undefined)
    // Each call makes its own name check: compared by kind.
    const shape = (tls: unknown) => ({
      ...(tls as object),
      checkServerIdentity: typeof (tls as Record<string, unknown>)?.checkServerIdentity,
    })
    const cluster = storeConnectOptions({ kind: 'cluster', nodes: [{ host: 'a', port: 7000 }] }, redisTls)
    assert.deepEqual(shape(cluster.clusterOptions?.redisOptions.tls), shape(options))
    const sentinel = storeConnectOptions({ kind: 'sentinel', sentinels: [{ host: 's', port: 26379 }], name: 'm' }, redisTls).redis
    assert.deepEqual(
      [shape(sentinel?.tls), shape(sentinel?.sentinelTLS), sentinel?.enableTLSForSentinelMode],
      [shape(options), shape(options), true],
    )
    const plain = storeConnectOptions({ kind: 'cluster', nodes: [{ host: 'a', port: 7000 }] }, { ...redisTls, nodes: false })
    assert.deepEqual(plain.clusterOptions?.redisOptions, {})
  })
})

describe("upstream's variables", () => {
  it('REDIS_TLS with REDIS_TLS_CACERT, _CLIENT_CERT, _CLIENT_KEY and _SKIP_HOSTNAME_VERIFICATION are read, no longer refused', () => {
    const settings = readSettings(['r'], { REDIS_SOCKET_TYPE: 'tcp', REDIS_URL: 'h:6380', REDIS_TLS: 'true', ...UPSTREAM_TLS() })
    assert.deepEqual(settings.store, { kind: 'redis', url: 'rediss://h:6380' })
    assert.equal(settings.redisTls.ca, readFileSync(certs.ca, 'utf8'))
    assert.equal(settings.redisTls.key, readFileSync(certs.client.key, 'utf8'))
    assert.equal(settings.redisTls.skipHostnameVerification, true)
  })

  it('without REDIS_TLS the files are ignored, as upstream ignores them, and said so', () => {
    const settings = readSettings(['r'], { REDIS_SOCKET_TYPE: 'tcp', REDIS_URL: 'h:6379', ...UPSTREAM_TLS() })
    assert.equal(settings.redisTls.ca, undefined)
    assert.ok(settings.upstreamNotes.some((n) => /REDIS_TLS_CACERT is ignored without REDIS_TLS=true/.test(n)))
  })

  it('REDIS_TLS with a Cluster or Sentinels turns on TLS to their nodes', () => {
    const cluster = readSettings(['r'], { REDIS_SOCKET_TYPE: 'tcp', REDIS_TYPE: 'cluster', REDIS_URL: 'a:7000', REDIS_TLS: 'true' })
    assert.equal(cluster.redisTls.nodes, true)
    const sentinel = readSettings(['r'], { REDIS_SOCKET_TYPE: 'tcp', REDIS_TYPE: 'sentinel', REDIS_URL: 'm,s:26379', REDIS_TLS: 'true' })
    assert.equal(sentinel.redisTls.nodes, true)
  })

  it('REDIS_SOCKET_TYPE=unix (the default) with a socket path, REDIS_AUTH in the query; the per-second Redis too', () => {
    const settings = readSettings(['r', '--compat-keys', 'envoy'], {
      ...{ REDIS_URL: '/var/run/nutcracker/ratelimit.sock', REDIS_AUTH: 'user:p@ss' },
      ...{ REDIS_PERSECOND: 'true', REDIS_PERSECOND_AUTH: 'secret' },
    })
    assert.deepEqual(settings.store, { kind: 'redis', url: 'unix:///var/run/nutcracker/ratelimit.sock?username=user&password=p%40ss' })
    assert.equal(settings.redisPerSecondUrl, 'unix:///var/run/nutcracker/ratelimitpersecond.sock?password=secret')
    assert.deepEqual(urlConnectOptions(settings.store.kind === 'redis' ? settings.store.url : '', settings.redisTls).redis, {
      path: '/var/run/nutcracker/ratelimit.sock',
      username: 'user',
      password: 'p@ss',
    })
  })

  it('refuses what it cannot do over a socket, with the reason', () => {
    const cases: [Record<string, string>, RegExp][] = [
      [
        { REDIS_URL: '/r.sock', REDIS_TLS: 'true' },
        /REDIS_TLS=true with REDIS_SOCKET_TYPE=unix: Floodgate reaches a unix socket without TLS/,
      ],
      [
        { REDIS_URL: 'a:7000', REDIS_TYPE: 'cluster' },
        /REDIS_TYPE=CLUSTER with REDIS_SOCKET_TYPE=unix: cluster nodes are reached over TCP/,
      ],
      [{ REDIS_URL: 'h:1', REDIS_SOCKET_TYPE: 'udp' }, /REDIS_SOCKET_TYPE=udp: expected tcp or unix/],
      [{ REDIS_PERSECOND: 'true', REDIS_PERSECOND_TLS: 'true' }, /REDIS_PERSECOND_TLS=true with REDIS_PERSECOND_SOCKET_TYPE=unix/],
    ]
    for (const [env, message] of cases) assert.throws(() => readSettings(['r', '--compat-keys', 'envoy'], env), message)
  })
})
