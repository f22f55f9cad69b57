// TLS (with client certificates) and unix sockets to Redis and to the per-second Redis: real redis-servers,
// certificates made by openssl here, and the service deciding through them (issue 29 §2).

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync, rmSync, writeFileSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { pino } from 'pino'
import { freePort, startRedis, type RedisProcess } from '../../../floodgate/test/support/redis-server.js'
import { startTlsSentinel } from './redis-tls-sentinel.js'
import { startService } from '../../src/service/server.js'
import { readSettings } from '../../src/service/settings.js'
import { makeTestCerts, tlsServerArgs, type TestCerts } from './redis-tls-certs.js'
import { postJson, startTestService } from './helpers.js'

// Hour limits: no window edge in reach of a test. `ip` is per second: upstream keeps those apart (REDIS_PERSECOND).
const RULES = `
domain: tls
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 2 }
  - key: ip
    rate_limit: { unit: second, requests_per_unit: 1000000 }
`

/** One /json decision for `<key>=<value>`: its overall code, or ERROR when the store was not reached. */
async function decide(service: { httpUrl: string }, value: string, key = 'user'): Promise<string> {
  const { body } = await postJson(`${service.httpUrl}/json`, { domain: 'tls', descriptors: [{ entries: [{ key, value }] }] })
  return body.overallCode ?? 'ERROR'
}

/** Waits (for a state, not a time) until a decision is answered: the client connects after the service starts. */
async function firstAnswer(service: { httpUrl: string }, value: string, key = 'user'): Promise<string> {
  const deadline = Date.now() + 20_000
  for (;;) {
    const code = await decide(service, value, key)
    if (code !== 'ERROR' || Date.now() > deadline) return code
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/** A logger that keeps its error lines, and waits for one that matches. */
function capturedLog() {
  const lines: string[] = []
  const logger = pino({ level: 'error' }, { write: (line: string) => void lines.push(line) })
  return {
    logger,
    lines,
    async waitFor(pattern: RegExp): Promise<string> {
      const deadline = Date.now() + 20_000
      for (;;) {
        const line = lines.find((l) => pattern.test(l))
        if (line !== undefined) return line
        if (Date.now() > deadline) assert.fail(`no log line matches ${pattern}; logged:\n${lines.join('')}`)
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
    },
  }
}

/** How many INCRBY a Redis has run (commandstats do not expire, unlike a per-second key). */
async function incrbyCalls(client: Redis): Promise<number> {
  const match = /cmdstat_incrby:calls=(\d+)/.exec(await client.info('commandstats'))
  return Number(match?.[1] ?? 0)
}

let certs: TestCerts

before(() => {
  certs = makeTestCerts()
})
after(() => certs?.remove())

/** A test's own client of a TLS Redis, with the right CA and a client certificate. */
function tlsClient(port: number): Redis {
  return new Redis(`rediss://127.0.0.1:${port}`, {
    tls: { ca: readFileSync(certs.ca), cert: readFileSync(certs.client.cert), key: readFileSync(certs.client.key) },
  })
}

const tlsFlags = () => ['--redis-tls-ca', certs.ca, '--redis-tls-cert', certs.client.cert, '--redis-tls-key', certs.client.key]

describe('a Redis that requires TLS and client certificates (tls-auth-clients yes)', () => {
  let redis: RedisProcess
  let port: number
  let client: Redis

  before(async () => {
    port = await freePort()
    redis = await startRedis(tlsServerArgs(certs, port), port)
    client = tlsClient(port)
  })
  after(async () => {
    client?.disconnect()
    await redis?.stop()
  })

  it("upstream's REDIS_TLS, REDIS_TLS_CACERT, REDIS_TLS_CLIENT_CERT and _KEY: the service decides through it", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'floodgate-tls-rules-'))
    writeFileSync(join(dir, 'rules.yaml'), RULES)
    const settings = readSettings([], {
      ...{ REDIS_URL: `127.0.0.1:${port}`, REDIS_SOCKET_TYPE: 'tcp', REDIS_TLS: 'true' },
      ...{ REDIS_TLS_CACERT: certs.ca, REDIS_TLS_CLIENT_CERT: certs.client.cert, REDIS_TLS_CLIENT_KEY: certs.client.key },
      ...{ RUNTIME_ROOT: dir, RUNTIME_SUBDIRECTORY: '', RUNTIME_APPDIRECTORY: '.', HOST: '127.0.0.1', PORT: '0', GRPC_PORT: '0' },
    })
    const service = await startService(settings, { logger: pino({ level: 'silent' }) })
    try {
      assert.equal(await firstAnswer(service, 'env'), 'OK')
      assert.equal(await decide(service, 'env'), 'OK')
      assert.equal(await decide(service, 'env'), 'OVER_LIMIT')
      // Counted in that Redis: its keys are there.
      assert.ok((await client.keys('fg:*')).length > 0, 'no key of the service in the TLS Redis')
    } finally {
      await service.close()
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('without a client certificate the connection is refused, the log says what to give, and nothing is admitted', async () => {
    const log = capturedLog()
    const service = await startTestService(RULES, ['--redis', `rediss://127.0.0.1:${port}`, '--redis-tls-ca', certs.ca], {
      logger: log.logger,
    })
    try {
      const line = await log.waitFor(/cannot connect to Redis/)
      assert.match(line, /requires a client certificate.*--redis-tls-cert and --redis-tls-key/)
      assert.equal(await decide(service, 'no-cert'), 'ERROR')
      assert.deepEqual(await client.keys('fg:*no-cert*'), [])
    } finally {
      await service.stop()
    }
  })

  it('a server certificate from another CA is refused, with or without hostname verification', async () => {
    for (const skip of [[], ['--redis-tls-skip-hostname-verification']]) {
      const log = capturedLog()
      const args = ['--redis', `rediss://127.0.0.1:${port}`, '--redis-tls-ca', certs.otherCa]
      const service = await startTestService(
        RULES,
        [...args, '--redis-tls-cert', certs.client.cert, '--redis-tls-key', certs.client.key, ...skip],
        {
          logger: log.logger,
        },
      )
      try {
        // Skipping the name check still verifies the chain, as upstream's REDIS_TLS_SKIP_HOSTNAME_VERIFICATION.
        assert.match(await log.waitFor(/cannot connect to Redis/), /not signed by a trusted CA.*--redis-tls-ca/, `flags ${skip}`)
        assert.equal(await decide(service, 'wrong-ca'), 'ERROR')
      } finally {
        await service.stop()
      }
    }
  })
})

describe('a Redis whose certificate names another host', () => {
  let redis: RedisProcess
  let port: number

  before(async () => {
    port = await freePort()
    redis = await startRedis(tlsServerArgs(certs, port, certs.otherName), port)
  })
  after(() => redis?.stop())

  it('is refused for its name, and reached with --redis-tls-skip-hostname-verification', async () => {
    const log = capturedLog()
    const refused = await startTestService(RULES, ['--redis', `rediss://127.0.0.1:${port}`, ...tlsFlags()], { logger: log.logger })
    try {
      assert.match(await log.waitFor(/cannot connect to Redis/), /for another name.*--redis-tls-skip-hostname-verification/)
      assert.equal(await decide(refused, 'name'), 'ERROR')
    } finally {
      await refused.stop()
    }
    const skipping = await startTestService(RULES, [
      ...['--redis', `rediss://127.0.0.1:${port}`, ...tlsFlags(), '--redis-tls-skip-hostname-verification'],
    ])
    try {
      assert.equal(await firstAnswer(skipping, 'name'), 'OK')
      assert.equal(await decide(skipping, 'name'), 'OK')
      assert.equal(await decide(skipping, 'name'), 'OVER_LIMIT')
    } finally {
      await skipping.stop()
    }
  })
})

describe('a Redis on a unix socket', () => {
  let redis: RedisProcess
  let socket: string
  let client: Redis

  before(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fg-sock-'))
    socket = join(dir, 'redis.sock')
    // The TCP port stays open only for startRedis's readiness wait and this test's own client.
    redis = await startRedis(['--unixsocket', socket, '--unixsocketperm', '700'])
    client = new Redis(redis.url)
  })
  after(async () => {
    client?.disconnect()
    await redis?.stop()
  })

  it("--redis unix:///path: the service decides through the socket (upstream's REDIS_SOCKET_TYPE=unix maps to it)", async () => {
    assert.deepEqual(readSettings(['r'], { REDIS_URL: socket }).store, { kind: 'redis', url: `unix://${socket}` })
    const service = await startTestService(RULES, ['--redis', `unix://${socket}`])
    try {
      assert.equal(await firstAnswer(service, 'sock'), 'OK')
      assert.equal(await decide(service, 'sock'), 'OK')
      assert.equal(await decide(service, 'sock'), 'OVER_LIMIT')
      assert.ok((await client.keys('fg:*')).length > 0, 'no key of the service in the socket Redis')
    } finally {
      await service.stop()
    }
  })

  it('a socket that is not there is named in the log', async () => {
    const log = capturedLog()
    const missing = join(tmpdir(), 'floodgate-no-such-redis.sock')
    const service = await startTestService(RULES, ['--redis', `unix://${missing}`], { logger: log.logger })
    try {
      assert.match(await log.waitFor(/cannot connect to Redis/), new RegExp(`unix socket ${missing.replaceAll('.', '\\.')}`))
      assert.equal(await decide(service, 'missing'), 'ERROR')
    } finally {
      await service.stop()
    }
  })

  it('holds the per-second counters of --compat-keys envoy (REDIS_PERSECOND_SOCKET_TYPE=unix)', async () => {
    const main = await startRedis()
    const mainClient = new Redis(main.url)
    const service = await startTestService(RULES, ['--redis', main.url, '--compat-keys', 'envoy', '--redis-per-second', `unix://${socket}`])
    try {
      const before = await incrbyCalls(client)
      assert.equal(await firstAnswer(service, '10.0.0.1', 'ip'), 'OK')
      assert.ok((await incrbyCalls(client)) > before, 'the per-second Redis (socket) counted nothing')
      assert.equal(await incrbyCalls(mainClient), 0, 'a per-second counter went to the main Redis')
    } finally {
      mainClient.disconnect()
      await service.stop()
      await main.stop()
    }
  })
})

describe('a per-second Redis over TLS', () => {
  it('holds the per-second counters of --compat-keys envoy (REDIS_PERSECOND_TLS) with the same TLS files', async () => {
    const port = await freePort()
    const [main, perSecond] = await Promise.all([startRedis(), startRedis(tlsServerArgs(certs, port), port)])
    const [mainClient, perSecondClient] = [new Redis(main.url), tlsClient(port)]
    const dir = mkdtempSync(join(tmpdir(), 'floodgate-tls-rules-'))
    writeFileSync(join(dir, 'rules.yaml'), RULES)
    // Upstream's variables: the main Redis in the clear, the per-second one over TLS with a client certificate.
    const settings = readSettings(['--compat-keys', 'envoy'], {
      ...{ REDIS_URL: `127.0.0.1:${main.port}`, REDIS_SOCKET_TYPE: 'tcp', REDIS_PERSECOND: 'true', REDIS_PERSECOND_TLS: 'true' },
      ...{ REDIS_PERSECOND_URL: `127.0.0.1:${port}`, REDIS_PERSECOND_SOCKET_TYPE: 'tcp' },
      ...{ REDIS_TLS_CACERT: certs.ca, REDIS_TLS_CLIENT_CERT: certs.client.cert, REDIS_TLS_CLIENT_KEY: certs.client.key },
      ...{ RUNTIME_ROOT: dir, RUNTIME_SUBDIRECTORY: '', RUNTIME_APPDIRECTORY: '.', HOST: '127.0.0.1', PORT: '0', GRPC_PORT: '0' },
    })
    const service = await startService(settings, { logger: pino({ level: 'silent' }) })
    try {
      const before = await incrbyCalls(perSecondClient)
      assert.equal(await firstAnswer(service, '10.0.0.2', 'ip'), 'OK')
      assert.ok((await incrbyCalls(perSecondClient)) > before, 'the per-second Redis (TLS) counted nothing')
      assert.equal(await incrbyCalls(mainClient), 0, 'a per-second counter went to the main Redis')
    } finally {
      mainClient.disconnect()
      perSecondClient.disconnect()
      await service.close()
      await Promise.all([main.stop(), perSecond.stop()])
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe('Sentinels and their master over TLS (--redis-tls)', () => {
  it("upstream's REDIS_TLS: the service asks the Sentinel for the master and decides through it, both over TLS", async () => {
    const sentinel = await startTlsSentinel(certs)
    const dir = mkdtempSync(join(tmpdir(), 'floodgate-tls-rules-'))
    writeFileSync(join(dir, 'rules.yaml'), RULES)
    const settings = readSettings([], {
      ...{ REDIS_TYPE: 'sentinel', REDIS_URL: `${sentinel.name},127.0.0.1:${sentinel.port}`, REDIS_SOCKET_TYPE: 'tcp', REDIS_TLS: 'true' },
      ...{ REDIS_TLS_CACERT: certs.ca, REDIS_TLS_CLIENT_CERT: certs.client.cert, REDIS_TLS_CLIENT_KEY: certs.client.key },
      ...{ RUNTIME_ROOT: dir, RUNTIME_SUBDIRECTORY: '', RUNTIME_APPDIRECTORY: '.', HOST: '127.0.0.1', PORT: '0', GRPC_PORT: '0' },
    })
    const service = await startService(settings, { logger: pino({ level: 'silent' }) })
    const master = tlsClient(sentinel.master.port)
    try {
      assert.equal(await firstAnswer(service, 'sentinel'), 'OK')
      assert.equal(await decide(service, 'sentinel'), 'OK')
      assert.equal(await decide(service, 'sentinel'), 'OVER_LIMIT')
      assert.ok((await master.keys('fg:*')).length > 0, 'no key of the service in the master')
    } finally {
      master.disconnect()
      await service.close()
      await sentinel.stop()
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
