// HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED (--health-requires-rules): with rules from xDS, health fails
// until the management server has sent a config, so Envoy sends no traffic to a service limiting nothing.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { pino } from 'pino'
import { startService, type RunningService } from '../../src/service/server.js'
import { readSettings } from '../../src/service/settings.js'
import { readUpstreamEnvironment } from '../../src/service/upstream-env.js'
import { rlsClients } from './helpers.js'
import { limitConfig, TestXdsServer } from './xds-server.js'

async function startXdsService(port: number, env: Record<string, string>): Promise<RunningService> {
  const settings = readSettings(['--host', '127.0.0.1', '--http-port', '0', '--grpc-port', '0'], {
    CONFIG_TYPE: 'GRPC_XDS_SOTW',
    CONFIG_GRPC_XDS_SERVER_URL: `127.0.0.1:${port}`,
    CONFIG_GRPC_XDS_NODE_ID: 'node-h',
    ...env,
  })
  return startService(settings, { logger: pino({ level: 'silent' }) })
}

async function healthcheck(service: RunningService): Promise<number> {
  return (await fetch(`${service.httpUrl}/healthcheck`)).status
}

async function readyz(service: RunningService): Promise<{ status: string; reason: string }> {
  return (await fetch(`${service.httpUrl}/readyz`)).json() as Promise<{ status: string; reason: string }>
}

describe('health before the first xDS config', () => {
  const xds = new TestXdsServer()
  let gated: RunningService
  let plain: RunningService
  let gatedClient: ReturnType<typeof rlsClients>
  let plainClient: ReturnType<typeof rlsClients>
  before(async () => {
    await xds.start()
    // As Envoy Gateway's manifest for upstream sets them.
    gated = await startXdsService(xds.port, { HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED: 'true', FORCE_START_WITHOUT_INITIAL_CONFIG: 'true' })
    plain = await startXdsService(xds.port, {})
    gatedClient = rlsClients(gated.grpcPort)
    plainClient = rlsClients(plain.grpcPort)
  })
  after(async () => {
    gatedClient.close()
    plainClient.close()
    await gated.close()
    await plain.close()
    await xds.stop()
  })

  it('is NOT_SERVING and 500 under HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED, SERVING without it', async () => {
    await xds.waitForRequest(() => true)
    assert.equal(gated.rulesLoaded(), false)
    assert.equal((await gatedClient.healthCheck()).status, 'NOT_SERVING')
    assert.equal((await gatedClient.healthCheck('ratelimit')).status, 'NOT_SERVING')
    assert.equal(await healthcheck(gated), 500)
    assert.deepEqual(await readyz(gated), { status: 'degraded', reason: 'rules_not_loaded' })
    // Without the variable health follows the process alone, as upstream's default.
    assert.equal((await plainClient.healthCheck()).status, 'SERVING')
    assert.equal(await healthcheck(plain), 200)
    assert.equal((await readyz(plain)).reason, 'rules_not_loaded')
  })

  it('turns SERVING and 200 once a config is ACKed', async () => {
    xds.push('v1', [limitConfig('api', 'user', 2)])
    await xds.waitForRequest((r) => r.version_info === 'v1' && r.node?.id === 'node-h')
    // Both services take the push; wait for the gated one's state, not for a time.
    while (!gated.rulesLoaded()) await new Promise((resolve) => setImmediate(resolve))
    assert.equal((await gatedClient.healthCheck()).status, 'SERVING')
    assert.equal((await gatedClient.healthCheck('ratelimit')).status, 'SERVING')
    assert.equal(await healthcheck(gated), 200)
    assert.deepEqual(await readyz(gated), { status: 'ready', reason: 'ok' })
  })
})

it('FORCE_START_WITHOUT_INITIAL_CONFIG is taken with xDS, and refused for rules from files', () => {
  assert.doesNotThrow(() => readUpstreamEnvironment({ CONFIG_TYPE: 'GRPC_XDS_SOTW', FORCE_START_WITHOUT_INITIAL_CONFIG: 'true' }))
  assert.throws(() => readUpstreamEnvironment({ FORCE_START_WITHOUT_INITIAL_CONFIG: 'true' }), /rules from files must load/)
})
