// Redis AUTH where a URL cannot carry it: upstream's REDIS_AUTH with REDIS_TYPE=cluster or sentinel, and
// REDIS_SENTINEL_AUTH, on a real Cluster and a real Sentinel setup that refuse clients without the password.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pino } from 'pino'
import { Cluster, Redis } from 'ioredis'
import { startCluster, type RedisClusterHandle } from '../../../floodgate/test/support/redis-cluster.js'
import { startSentinel, type SentinelSetup } from '../../../floodgate/test/support/redis-sentinel.js'
import { readSettings } from '../../src/service/settings.js'
import { startService } from '../../src/service/server.js'
import { postJson } from './helpers.js'

const RULES = `
domain: auth
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 3 }
  - key: own
    limits:
      - { name: own, algorithm: gcra, limit: 3, period: 1h }
`
const PASSWORD = 'node secret'
const SENTINEL_PASSWORD = 'sentinel secret'

type Running = Awaited<ReturnType<typeof startService>>
// The service's clock, frozen, so upstream's window (and its counter's key) cannot turn during a test.
const T0 = Date.now()

/** Starts the service from upstream's variables `env` (and Floodgate's `args`); answers it and a stop. */
async function serve(env: Record<string, string>, args: string[] = []): Promise<{ service: Running; stop: () => Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-auth-'))
  writeFileSync(join(dir, 'rules.yaml'), RULES)
  const base = { REDIS_SOCKET_TYPE: 'tcp', HOST: '127.0.0.1', PORT: '0', GRPC_PORT: '0', FLOODGATE_STORE_TIMEOUT: '5s' }
  const service = await startService(readSettings(['--config', dir, ...args], { ...base, ...env }), {
    logger: pino({ level: 'silent' }),
    clock: () => T0,
  })
  return {
    service,
    async stop() {
      await service.close()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

/** The overall code of one /json decision for `<key>=<value>` ('ERROR' when the store did not answer). */
async function decide(service: Running, key: string, value: string): Promise<string> {
  const { body } = await postJson(`${service.httpUrl}/json`, { domain: 'auth', descriptors: [{ entries: [{ key, value }] }] })
  return body.overallCode ?? 'ERROR'
}

/** Waits until a decision reaches the store (the clients connect after the start); false after `tries` × 50 ms. */
async function reaches(service: Running, tries = 200): Promise<boolean> {
  for (let i = 0; i < tries; i++) {
    if ((await decide(service, 'own', `probe-${i}`)) !== 'ERROR') return true
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  return false
}

async function codes(service: Running, key: string, value: string, count: number): Promise<string[]> {
  const out = []
  for (let i = 0; i < count; i++) out.push(await decide(service, key, value))
  return out
}

describe('the settings', () => {
  const base = { REDIS_SOCKET_TYPE: 'tcp' }
  it('REDIS_AUTH goes to every Cluster node, as upstream dials them', () => {
    const store = readSettings(['r'], { ...base, REDIS_TYPE: 'cluster', REDIS_URL: 'a:7000', REDIS_AUTH: 'app:p:w' }).store
    assert.deepEqual(store, { kind: 'cluster', nodes: [{ host: 'a', port: 7000 }], auth: { username: 'app', password: 'p:w' } })
  })

  it("REDIS_AUTH goes to the Sentinels' master, REDIS_SENTINEL_AUTH to the Sentinels", () => {
    const env = { ...base, REDIS_TYPE: 'sentinel', REDIS_URL: 'm,s:26379', REDIS_AUTH: 'pw', REDIS_SENTINEL_AUTH: 'ops:spw' }
    assert.deepEqual(readSettings(['r'], env).store, {
      kind: 'sentinel',
      name: 'm',
      sentinels: [{ host: 's', port: 26379 }],
      auth: { password: 'pw' },
      sentinelAuth: { username: 'ops', password: 'spw' },
    })
  })

  it('a secret given where it would not be used is refused with the reason', () => {
    assert.throws(() => readSettings(['r', '--redis', 'redis://h:1', '--redis-auth', 'pw']), /redis-auth.*put the credentials in the URL/s)
    assert.throws(
      () => readSettings(['r', '--redis-cluster', 'h:1', '--redis-sentinel-auth', 'pw']),
      /redis-sentinel-auth.*--redis-sentinel/s,
    )
  })
})

describe('on a Cluster that requires a password', () => {
  let cluster: RedisClusterHandle
  before(async () => {
    cluster = await startCluster({ replicasPerMaster: 0, password: PASSWORD })
  })
  after(async () => {
    await cluster?.stop()
  })
  const nodes = () => cluster.startupNodes.map(({ host, port }) => `${host}:${port}`).join(',')

  it("decides, with upstream's counters (--compat-keys envoy) on the same Cluster", async () => {
    const { service, stop } = await serve({ REDIS_TYPE: 'cluster', REDIS_URL: nodes(), REDIS_AUTH: PASSWORD }, ['--compat-keys', 'envoy'])
    try {
      assert.ok(await reaches(service), 'a decision reached the Cluster')
      assert.deepEqual(await codes(service, 'own', 'ann', 4), ['OK', 'OK', 'OK', 'OVER_LIMIT'])
      // The upstream-format rule counts through the compat counter's own Cluster client, which needs AUTH too.
      let user = await codes(service, 'user', 'bob', 1)
      for (let i = 0; user[0] === 'ERROR' && i < 200; i++) {
        await new Promise((resolve) => setTimeout(resolve, 50))
        user = await codes(service, 'user', 'bob', 1)
      }
      user.push(...(await codes(service, 'user', 'bob', 3)))
      assert.deepEqual(user, ['OK', 'OK', 'OK', 'OVER_LIMIT'])
      const reader = new Cluster(cluster.startupNodes as { host: string; port: number }[], { redisOptions: { password: PASSWORD } })
      try {
        assert.equal(await reader.get(`auth_user_bob_${Math.floor(T0 / 3_600_000) * 3600}`), '4')
      } finally {
        reader.disconnect()
      }
    } finally {
      await stop()
    }
  })

  it('without the password no decision reaches it (the test would pass without AUTH otherwise)', async () => {
    const { service, stop } = await serve({ REDIS_TYPE: 'cluster', REDIS_URL: nodes() })
    try {
      assert.equal(await reaches(service, 20), false)
    } finally {
      await stop()
    }
  })
})

describe('on Sentinels and a master that each require a password', () => {
  let setup: SentinelSetup
  before(async () => {
    setup = await startSentinel('authmaster', 20_000, { password: PASSWORD, sentinelPassword: SENTINEL_PASSWORD })
  })
  after(async () => {
    await setup?.stop()
  })
  const url = () => `authmaster,${setup.sentinels.map(({ host, port }) => `${host}:${port}`).join(',')}`

  it('decides on the master the Sentinels name, with REDIS_AUTH and REDIS_SENTINEL_AUTH', async () => {
    const env = { REDIS_TYPE: 'sentinel', REDIS_URL: url(), REDIS_AUTH: PASSWORD, REDIS_SENTINEL_AUTH: SENTINEL_PASSWORD }
    const { service, stop } = await serve(env)
    try {
      assert.ok(await reaches(service), 'a decision reached the master')
      assert.deepEqual(await codes(service, 'own', 'cy', 4), ['OK', 'OK', 'OK', 'OVER_LIMIT'])
      const master = new Redis({ port: setup.master.port, password: PASSWORD })
      try {
        assert.ok((await master.dbsize()) > 0, 'the records are on the master')
      } finally {
        master.disconnect()
      }
    } finally {
      await stop()
    }
  })

  it("without the Sentinels' password no decision reaches the master", async () => {
    const { service, stop } = await serve({ REDIS_TYPE: 'sentinel', REDIS_URL: url(), REDIS_AUTH: PASSWORD })
    try {
      assert.equal(await reaches(service, 20), false)
    } finally {
      await stop()
    }
  })
})
