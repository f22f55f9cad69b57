// The service on a real Redis Cluster that serves TLS only (client certificates required, the bus over TLS too),
// configured with upstream's variables (REDIS_TYPE=cluster, REDIS_TLS, REDIS_TLS_*): issue 29 §2.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pino } from 'pino'
import { startService, type RunningService } from '../../src/service/server.js'
import { readSettings } from '../../src/service/settings.js'
import { makeTestCerts, type TestCerts } from './redis-tls-certs.js'
import { startTlsCluster, type TlsCluster } from './redis-tls-cluster.js'
import { makeLeaf } from './tls-certs.js'
import { postJson, rlsClients } from './helpers.js'

// An hour limit: no window edge in reach of a test.
const RULES = `
domain: tls
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 2 }
`

/** Enough users that each master holds some of their keys (checked, not assumed: the slots decide). */
const USERS = Array.from({ length: 12 }, (_, i) => `cluster-tls-${i}`)

let certs: TestCerts
let rulesDir: string
before(() => {
  certs = makeTestCerts()
  rulesDir = mkdtempSync(join(tmpdir(), 'floodgate-tls-cluster-rules-'))
  writeFileSync(join(rulesDir, 'rules.yaml'), RULES)
})
after(() => {
  certs?.remove()
  rmSync(rulesDir, { recursive: true, force: true })
})

/** A logger that keeps its error lines. */
function capturedLog() {
  const lines: string[] = []
  return { logger: pino({ level: 'error' }, { write: (line: string) => void lines.push(line) }), lines }
}

/**
 * The service as upstream's manifest would start it: REDIS_TYPE=cluster over TLS to the nodes of `url`
 * (default the cluster's), with `tls` as the TLS variables and `args` as Floodgate's own flags.
 */
function startWithUpstreamEnv(
  cluster: TlsCluster,
  tls: Record<string, string>,
  { logger = pino({ level: 'silent' }), args = [] as string[], url = cluster.url } = {},
) {
  const settings = readSettings(args, {
    ...{ REDIS_TYPE: 'cluster', REDIS_URL: url, REDIS_SOCKET_TYPE: 'tcp', REDIS_TLS: 'true', ...tls },
    ...{ RUNTIME_ROOT: rulesDir, RUNTIME_SUBDIRECTORY: '', RUNTIME_APPDIRECTORY: '.', HOST: '127.0.0.1', PORT: '0', GRPC_PORT: '0' },
  })
  return startService(settings, { logger })
}

const request = (value: string) => ({ domain: 'tls', descriptors: [{ entries: [{ key: 'user', value }] }] })

/** One /json decision: its overall code, or ERROR when the service answered none (the store was not reached). */
async function overJson(service: RunningService, value: string): Promise<string> {
  const { body } = await postJson(`${service.httpUrl}/json`, request(value))
  return body?.overallCode ?? 'ERROR'
}

/** Waits (for a state, not a time) until a decision is answered: the client finds the cluster after the service starts. */
async function firstAnswer(service: RunningService, value: string): Promise<string> {
  const deadline = Date.now() + 30_000
  for (;;) {
    const code = await overJson(service, value)
    if (code !== 'ERROR' || Date.now() > deadline) return code
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/** The users whose counters each master holds, by its port. */
async function usersByMaster(cluster: TlsCluster): Promise<Map<number, string[]>> {
  const held = new Map<number, string[]>()
  for (const port of cluster.ports) {
    const keys = await cluster.client(port).keys('fg:*')
    held.set(
      port,
      USERS.filter((user) => keys.some((key) => key.includes(`${user}}`))),
    )
  }
  return held
}

const TLS_FILES = () => ({ REDIS_TLS_CACERT: certs.ca, REDIS_TLS_CLIENT_CERT: certs.client.cert, REDIS_TLS_CLIENT_KEY: certs.client.key })

describe('a Redis Cluster over TLS (tls-cluster, tls-auth-clients yes), three masters', () => {
  let cluster: TlsCluster
  before(async () => {
    cluster = await startTlsCluster(certs)
  })
  after(() => cluster?.stop())

  it("upstream's REDIS_TYPE=cluster with REDIS_TLS and its files: gRPC and /json decide on keys of every master", async () => {
    const service = await startWithUpstreamEnv(cluster, TLS_FILES())
    const grpc = rlsClients(service.grpcPort)
    const overGrpc = async (value: string) => (await grpc.shouldRateLimit(request(value))).overall_code as string
    try {
      assert.equal(await firstAnswer(service, USERS[0]), 'OK')
      // Each user's two requests of the hour, the second of the first user already spent; then each is over.
      const codes = new Map<string, string[]>()
      for (const [i, user] of USERS.entries()) {
        const first = i === 0 ? 'OK' : await overGrpc(user)
        codes.set(user, [first, await overJson(service, user), await overGrpc(user), await overJson(service, user)])
      }
      for (const user of USERS) assert.deepEqual(codes.get(user), ['OK', 'OK', 'OVER_LIMIT', 'OVER_LIMIT'], user)
      const held = await usersByMaster(cluster)
      for (const [port, users] of held) assert.ok(users.length > 0, `the master on port ${port} holds no user's counter`)
      const counted = [...held.values()].flat()
      assert.deepEqual(counted.sort(), [...USERS].sort(), "each user's counter on exactly one master")
    } finally {
      grpc.close()
      await service.close()
    }
  })

  it("--compat-keys envoy: upstream's counters (INCRBY on upstream's keys) through the same TLS connections", async () => {
    const service = await startWithUpstreamEnv(cluster, TLS_FILES(), { args: ['--compat-keys', 'envoy'] })
    const users = USERS.map((user) => `compat-${user}`)
    try {
      assert.equal(await firstAnswer(service, users[0]), 'OK')
      for (const user of users.slice(1)) assert.equal(await overJson(service, user), 'OK', user)
      for (const user of users) assert.equal(await overJson(service, user), 'OK', user)
      for (const user of users) assert.equal(await overJson(service, user), 'OVER_LIMIT', user)
      // Upstream's keys carry the window start, so which master holds one depends on the hour: each is counted once, somewhere.
      const keys = (await Promise.all(cluster.ports.map((port) => cluster.client(port).keys('tls_user_compat-*')))).flat()
      assert.deepEqual(keys.map((key) => key.replace(/^tls_user_(.*)_\d+$/, '$1')).sort(), [...users].sort())
    } finally {
      await service.close()
    }
  })

  for (const [what, files, hint] of [
    ['without the CA', { REDIS_TLS_CLIENT_CERT: 'client', REDIS_TLS_CLIENT_KEY: 'client' }, /not signed by a trusted CA.*REDIS_TLS_CACERT/],
    ['without a client certificate', { REDIS_TLS_CACERT: 'ca' }, /requires a client certificate.*REDIS_TLS_CLIENT_CERT/],
  ] as const) {
    it(`a service ${what} is refused by every node, says what to give, and admits nothing`, async () => {
      const paths = Object.fromEntries(
        Object.entries(files).map(([name, file]) => [
          name,
          file === 'ca' ? certs.ca : name.endsWith('KEY') ? certs.client.key : certs.client.cert,
        ]),
      )
      const log = capturedLog()
      const service = await startWithUpstreamEnv(cluster, paths, { logger: log.logger })
      try {
        const value = `refused-${what.replaceAll(' ', '-')}`
        for (let i = 0; i < 3; i++) assert.equal(await overJson(service, value), 'ERROR')
        await waitForLine(log.lines, /cannot connect to Redis/)
        const line = log.lines.find((l) => /cannot connect to Redis/.test(l)) as string
        assert.match(line, hint)
        for (const port of cluster.ports) assert.deepEqual(await cluster.client(port).keys(`fg:*${value}*`), [], `port ${port}`)
      } finally {
        await service.close()
      }
    })
  }
})

describe('a Redis Cluster over TLS whose certificates name the nodes by host name, not IP', () => {
  let cluster: TlsCluster
  before(async () => {
    // Certificates for a name only, as a cert-manager Certificate for a Service's DNS names usually is.
    const named = makeLeaf(
      certs.dir,
      'cluster-named',
      { cert: certs.ca, key: certs.ca.replace(/\.crt$/, '.key') },
      'redis',
      ['DNS:localhost'],
      'serverAuth',
    )
    cluster = await startTlsCluster(certs, { server: named, hostname: 'localhost' })
  })
  after(() => cluster?.stop())

  it('REDIS_URL with the names: every node is verified against the name it is reached by', async () => {
    const service = await startWithUpstreamEnv(cluster, TLS_FILES())
    try {
      assert.equal(await firstAnswer(service, USERS[0]), 'OK')
      for (const user of USERS.slice(1)) assert.equal(await overJson(service, user), 'OK', user)
      for (const user of USERS) assert.equal(await overJson(service, user), 'OK', user)
      for (const user of USERS) assert.equal(await overJson(service, user), 'OVER_LIMIT', user)
      for (const [port, users] of await usersByMaster(cluster)) assert.ok(users.length > 0, `the master on port ${port} holds no counter`)
    } finally {
      await service.close()
    }
  })

  it('REDIS_URL with IPs: refused for the name, and decided with REDIS_TLS_SKIP_HOSTNAME_VERIFICATION', async () => {
    const url = cluster.ports.map((port) => `127.0.0.1:${port}`).join(',')
    const log = capturedLog()
    const refused = await startWithUpstreamEnv(cluster, TLS_FILES(), { url, logger: log.logger })
    try {
      assert.equal(await overJson(refused, 'by-ip'), 'ERROR')
      await waitForLine(log.lines, /cannot connect to Redis/)
      assert.match(
        log.lines.find((l) => /cannot connect to Redis/.test(l)) as string,
        /for another name.*REDIS_TLS_SKIP_HOSTNAME_VERIFICATION/,
      )
    } finally {
      await refused.close()
    }
    // The chain is still verified: only the name check is skipped, as upstream's variable does.
    const skipping = await startWithUpstreamEnv(cluster, { ...TLS_FILES(), REDIS_TLS_SKIP_HOSTNAME_VERIFICATION: 'true' }, { url })
    try {
      assert.equal(await firstAnswer(skipping, 'by-ip'), 'OK')
      assert.equal(await overJson(skipping, 'by-ip'), 'OK')
      assert.equal(await overJson(skipping, 'by-ip'), 'OVER_LIMIT')
    } finally {
      await skipping.close()
    }
  })
})

async function waitForLine(lines: string[], pattern: RegExp): Promise<void> {
  const deadline = Date.now() + 30_000
  while (!lines.some((line) => pattern.test(line))) {
    if (Date.now() > deadline) assert.fail(`no log line matches ${pattern}; logged:\n${lines.join('')}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}
