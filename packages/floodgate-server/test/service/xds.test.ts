// Rules from an xDS management server (CONFIG_TYPE=GRPC_XDS_SOTW): a real grpc-js ADS server in the test, the real service.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as grpc from '@grpc/grpc-js'
import { pino } from 'pino'
import { startService, type RunningService } from '../../src/service/server.js'
import { readSettings } from '../../src/service/settings.js'
import { protoDir } from '../../src/service/grpc-server.js'
import { XdsRules } from '../../src/service/xds/xds-rules.js'
import { readXdsSettings } from '../../src/service/xds/xds-settings.js'
import { parseRules, type RuleSet } from 'floodgate/rules'
import { rlsClients } from './helpers.js'
import { limitConfig, TestXdsServer } from './xds-server.js'
import { makeCa, makeLeaf } from './tls-certs.js'

const user = (value: string) => ({ entries: [{ key: 'user', value }] })

async function startXdsService(env: Record<string, string>): Promise<RunningService> {
  const settings = readSettings(['--host', '127.0.0.1', '--http-port', '0', '--grpc-port', '0'], { CONFIG_TYPE: 'GRPC_XDS_SOTW', ...env })
  return startService(settings, { logger: pino({ level: 'silent' }) })
}

describe('xDS rules in the service', () => {
  const xds = new TestXdsServer()
  let service: RunningService
  let client: ReturnType<typeof rlsClients>
  before(async () => {
    await xds.start()
    service = await startXdsService({
      CONFIG_GRPC_XDS_SERVER_URL: `127.0.0.1:${xds.port}`,
      CONFIG_GRPC_XDS_NODE_ID: 'node-a',
      CONFIG_GRPC_XDS_NODE_METADATA: 'zone=eu-1',
      CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS: 'x-tenant:blue,authorization:Bearer t0k',
    })
    client = rlsClients(service.grpcPort)
  })
  after(async () => {
    client.close()
    await service.close()
    await xds.stop()
  })

  it('starts without rules, asks for RateLimitConfig as its node with the extra headers, and limits nothing yet', async () => {
    const hello = await xds.waitForRequest(() => true)
    assert.equal(hello.type_url, 'type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig')
    assert.equal(hello.node?.id, 'node-a')
    assert.equal(hello.node?.metadata?.fields.zone.stringValue, 'eu-1')
    assert.deepEqual(hello.metadata.get('x-tenant'), ['blue'])
    assert.deepEqual(hello.metadata.get('authorization'), ['Bearer t0k'])
    assert.equal(service.rulesLoaded(), false)
    const response = await client.shouldRateLimit({ domain: 'api', descriptors: [user('early')], hits_addend: 50 })
    assert.equal(response.overall_code, 'OK')
    assert.equal(response.statuses[0].current_limit, null)
  })

  it('a pushed config is ACKed with its version and nonce, and the next decision uses it', async () => {
    xds.push('v1', [limitConfig('api', 'user', 2)])
    const ack = await xds.waitForRequest((r) => r.version_info === 'v1')
    assert.equal(ack.error_detail, null)
    assert.match(ack.response_nonce, /^n[0-9]+$/)
    assert.equal(service.rulesLoaded(), true)
    const codes = []
    for (let i = 0; i < 3; i++) codes.push((await client.shouldRateLimit({ domain: 'api', descriptors: [user('u1')] })).overall_code)
    assert.deepEqual(codes, ['OK', 'OK', 'OVER_LIMIT'])
  })

  it('a config that does not load is NACKed with the reason, and the old rules keep serving', async () => {
    // A limit without a unit: the YAML rules would be refused the same way.
    xds.push('v-bad', [{ name: 'bad', domain: 'api', descriptors: [{ key: 'user', rate_limit: { requests_per_unit: 5 } }] }])
    const nack = await xds.waitForRequest((r) => r.error_detail !== null)
    assert.equal(nack.version_info, 'v1', 'a NACK names the last accepted version')
    assert.match(nack.error_detail?.message ?? '', /xds:bad.*missing unit/)
    const response = await client.shouldRateLimit({ domain: 'api', descriptors: [user('u2')] })
    assert.equal(response.statuses[0].current_limit.requests_per_unit, 2)
    // The same holds for a resource of another type.
    xds.pushResources('v-odd', [{ type_url: 'type.googleapis.com/envoy.config.cluster.v3.Cluster', value: Buffer.alloc(0) }])
    const odd = await xds.waitForRequest((r) => r.error_detail?.message.includes('Cluster') === true)
    assert.equal(odd.version_info, 'v1')
  })

  it('a push under load: every decision answers, and each one started after the ACK uses the new config', async () => {
    xds.push('v2', [limitConfig('api', 'user', 1000)])
    await xds.waitForRequest((r) => r.version_info === 'v2')
    let acked = false
    let pushed = false
    let n = 0
    const results: { afterAck: boolean; limit: number | undefined; code: string }[] = []
    const errors: unknown[] = []
    const worker = async () => {
      // Every decision is a new user: none is over its limit, so any OVER_LIMIT or error is a fault.
      while (results.length < 400 || !acked) {
        const afterAck = acked
        try {
          const response = await client.shouldRateLimit({ domain: 'api', descriptors: [user(`load-${n++}`)] })
          results.push({ afterAck, limit: response.statuses[0].current_limit?.requests_per_unit, code: response.overall_code })
        } catch (error) {
          errors.push(error)
        }
        if (!pushed && results.length >= 100) {
          pushed = true
          xds.push('v3', [limitConfig('api', 'user', 7)])
          xds
            .waitForRequest((r) => r.version_info === 'v3')
            .then(() => {
              acked = true
            })
        }
      }
    }
    await Promise.all(Array.from({ length: 16 }, worker))
    assert.deepEqual(errors, [])
    assert.equal(results.length, n, 'every decision started was answered')
    assert.ok(results.every((r) => r.code === 'OK'))
    assert.deepEqual(new Set(results.filter((r) => r.afterAck).map((r) => r.limit)), new Set([7]))
    assert.ok(
      results.some((r) => r.limit === 1000),
      'decisions before the push used the old config',
    )
  })
})

describe('xDS client', () => {
  it('reconnects with exponential backoff after the server goes away, asks with its version, and ACKs the next push', async () => {
    const xds = new TestXdsServer()
    await xds.start()
    xds.push('v1', [limitConfig('api', 'user', 3)])
    const waits: number[] = []
    const timers = {
      setTimeout: ((fn: () => void, ms: number) => {
        waits.push(ms)
        return setTimeout(fn, ms)
      }) as typeof setTimeout,
      clearTimeout,
    }
    const settings = readXdsSettings({
      CONFIG_TYPE: 'GRPC_XDS_SOTW',
      CONFIG_GRPC_XDS_SERVER_URL: `127.0.0.1:${xds.port}`,
      XDS_CLIENT_BACKOFF_INITIAL_INTERVAL: '20ms',
      XDS_CLIENT_BACKOFF_MAX_INTERVAL: '80ms',
      XDS_CLIENT_BACKOFF_JITTER: 'false',
    })
    assert.ok(settings)
    const rules = new XdsRules(settings, { protoDir: protoDir(), timers })
    try {
      await xds.waitForRequest((r) => r.version_info === 'v1')
      await xds.stop()
      // Wait for a state, not a time: four failed attempts while the server is down.
      while (waits.length < 4) await new Promise((resolve) => rules.once('disconnect', resolve))
      assert.deepEqual(waits.slice(0, 4), [20, 40, 80, 80])
      const before = xds.requests.length
      await xds.start()
      const hello = await xds.waitForRequest((r) => xds.requests.indexOf(r) >= before)
      assert.equal(hello.version_info, 'v1', 'the reconnect names the version it holds')
      assert.equal(hello.response_nonce, '')
      xds.push('v2', [limitConfig('api', 'user', 4)])
      const ack = await xds.waitForRequest((r) => r.version_info === 'v2')
      assert.equal(ack.error_detail, null)
      assert.equal(rules.current.match('api', [[{ key: 'user', value: 'x' }]])[0]?.policies[0]?.limit, 4)
      // A response resets the backoff: the next loss waits the initial interval again.
      const lost = new Promise<{ retryInMs: number }>((resolve) => rules.once('disconnect', resolve))
      await xds.stop()
      assert.equal((await lost).retryInMs, 20)
    } finally {
      await rules.close()
      await xds.stop()
    }
  })

  it('connects over mTLS with the CA, client certificate and SAN of the settings', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'floodgate-xds-tls-'))
    t.after(() => rmSync(dir, { recursive: true, force: true }))
    const ca = makeCa(dir, 'ca')
    const server = makeLeaf(dir, 'server', ca, 'server', ['DNS:xds.internal'], 'serverAuth')
    const client = makeLeaf(dir, 'client', ca, 'client', ['DNS:floodgate'], 'clientAuth')
    const xds = new TestXdsServer()
    const serverCredentials = grpc.ServerCredentials.createSsl(
      readFileSync(ca.cert),
      [{ private_key: readFileSync(server.key), cert_chain: readFileSync(server.cert) }],
      true, // mTLS: a client without a certificate from the CA is refused
    )
    await xds.start(serverCredentials)
    xds.push('tls-1', [limitConfig('api', 'user', 9)])
    const base = {
      CONFIG_TYPE: 'GRPC_XDS_SOTW',
      CONFIG_GRPC_XDS_SERVER_URL: `127.0.0.1:${xds.port}`,
      CONFIG_GRPC_XDS_SERVER_USE_TLS: 'true',
      CONFIG_GRPC_XDS_SERVER_TLS_CACERT: ca.cert,
      CONFIG_GRPC_XDS_SERVER_TLS_SAN: 'xds.internal',
      XDS_CLIENT_BACKOFF_INITIAL_INTERVAL: '20ms',
    }
    // Without a client certificate the server refuses the handshake: the client keeps retrying.
    const anonymous = new XdsRules(readXdsSettings(base) as NonNullable<ReturnType<typeof readXdsSettings>>, { protoDir: protoDir() })
    const refused = await new Promise<{ reason: string }>((resolve) => anonymous.once('disconnect', resolve))
    await anonymous.close()
    assert.equal(anonymous.loaded, false)
    assert.match(refused.reason, /UNAVAILABLE|handshake|certificate|socket/i)
    const settings = readXdsSettings({
      ...base,
      CONFIG_GRPC_XDS_CLIENT_TLS_CERT: client.cert,
      CONFIG_GRPC_XDS_CLIENT_TLS_KEY: client.key,
    })
    assert.ok(settings)
    const rules = new XdsRules(settings, { protoDir: protoDir() })
    try {
      await new Promise((resolve) => rules.once('reload', resolve))
      const ack = await xds.waitForRequest((r) => r.version_info === 'tls-1')
      assert.equal(ack.error_detail, null)
      assert.equal(rules.loaded, true)
    } finally {
      await rules.close()
      await xds.stop()
    }
  })
})

describe('xDS resources', () => {
  it('a RateLimitConfig with every field loads as the YAML file it mirrors', async () => {
    const xds = new TestXdsServer()
    await xds.start()
    const full = {
      name: 'full',
      domain: 'edge',
      descriptors: [
        {
          key: 'tenant',
          value: 'acme',
          descriptors: [
            {
              key: 'path',
              rate_limit: { unit: 'MINUTE', requests_per_unit: 5, name: 'acme-path', replaces: [{ name: 'global' }] },
              detailed_metric: true,
              metadata: {
                fields: { team: { stringValue: 'core' }, tier: { numberValue: 2 }, tags: { listValue: { values: [{ boolValue: true }] } } },
              },
            },
            { key: 'vip', rate_limit: { unlimited: true } },
          ],
        },
        { key: 'ip', rate_limit: { unit: 'WEEK', requests_per_unit: 100, name: 'global' }, shadow_mode: true, quota_mode: true },
      ],
    }
    const yaml = `
domain: edge
descriptors:
  - key: tenant
    value: acme
    descriptors:
      - key: path
        metadata: { team: core, tier: 2, tags: [true] }
        detailed_metric: true
        rate_limit: { unit: minute, requests_per_unit: 5, name: acme-path, replaces: [{ name: global }] }
      - key: vip
        rate_limit: { unlimited: true }
  - key: ip
    shadow_mode: true
    quota_mode: true
    rate_limit: { unit: week, requests_per_unit: 100, name: global }
`
    xds.push('f1', [full])
    const settings = readXdsSettings({ CONFIG_TYPE: 'GRPC_XDS_SOTW', CONFIG_GRPC_XDS_SERVER_URL: `127.0.0.1:${xds.port}` })
    const rules = new XdsRules(settings as NonNullable<typeof settings>, { protoDir: protoDir() })
    try {
      await new Promise((resolve) => rules.once('reload', resolve))
      // Line numbers differ (the resource is written as JSON); everything else must not.
      const descriptors = (set: RuleSet) =>
        JSON.parse(JSON.stringify(set.describe().domains, (key, value) => (key === 'line' || key === 'file' ? undefined : value)))
      assert.deepEqual(descriptors(rules.current), descriptors(parseRules([{ file: 'edge.yaml', text: yaml }])))
      assert.deepEqual(rules.current.files, ['xds:full'])
    } finally {
      await rules.close()
      await xds.stop()
    }
  })
})

describe('xDS settings', () => {
  it("take upstream's defaults, and a malformed value is refused naming its variable", () => {
    const settings = readSettings(['--host', '127.0.0.1'], { CONFIG_TYPE: 'grpc_xds_sotw' })
    assert.equal(settings.config, 'xds:localhost:18000')
    assert.deepEqual(settings.xds, {
      serverUrl: 'localhost:18000',
      nodeId: 'default',
      nodeMetadata: {},
      headers: {},
      tls: undefined,
      backoff: { initialMs: 10_000, maxMs: 60_000, randomFactor: 0.5, jitter: true },
      maxMessageBytes: undefined,
    })
    assert.equal(readSettings(['rules.yaml'], {}).xds, undefined)
    assert.throws(
      () => readSettings([], { CONFIG_TYPE: 'GRPC_XDS_SOTW', XDS_CLIENT_BACKOFF_MAX_INTERVAL: '1 minute' }),
      /XDS_CLIENT_BACKOFF_MAX_INTERVAL=1 minute: expected a duration/,
    )
    assert.throws(
      () =>
        readSettings([], {
          CONFIG_TYPE: 'GRPC_XDS_SOTW',
          CONFIG_GRPC_XDS_SERVER_USE_TLS: 'true',
          CONFIG_GRPC_XDS_CLIENT_TLS_CERT: 'c.pem',
        }),
      /CONFIG_GRPC_XDS_CLIENT_TLS_KEY: set both/,
    )
  })

  it('an unreadable CA file stops the start with the variable and the reason', async () => {
    await assert.rejects(
      startXdsService({ CONFIG_GRPC_XDS_SERVER_USE_TLS: 'true', CONFIG_GRPC_XDS_SERVER_TLS_CACERT: '/nonexistent/ca.pem' }),
      /CONFIG_GRPC_XDS_SERVER_TLS_CACERT=\/nonexistent\/ca.pem: cannot read it: .*ENOENT/,
    )
  })
})
