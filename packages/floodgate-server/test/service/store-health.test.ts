// Health that Envoy can act on: with --health-check-store (upstream's REDIS_HEALTH_CHECK_ACTIVE_CONNECTION),
// gRPC health is NOT_SERVING and /healthcheck 500 while a real Redis is killed, and SERVING again once it is back.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pino } from 'pino'
import { startRedis, type RedisProcess } from '../../../floodgate/test/support/redis-server.js'
import { startService, type RunningService } from '../../src/service/server.js'
import { readSettings } from '../../src/service/settings.js'
import { rlsClients, startTestService, TEST_RULES } from './helpers.js'

/** Polls `probe` until it holds: the service learns of a killed or restarted Redis through its client's events. */
async function eventually(probe: () => Promise<boolean>, what: () => string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (await probe()) return
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  assert.fail(`timed out waiting for ${what()}`)
}

interface Health {
  grpc: string
  ratelimit: string
  healthcheck: number
  readyz: string
}

async function healthOf(service: RunningService): Promise<Health> {
  const client = rlsClients(service.grpcPort)
  try {
    const [all, ratelimit] = await Promise.all([client.healthCheck(''), client.healthCheck('ratelimit')])
    const healthcheck = (await fetch(`${service.httpUrl}/healthcheck`)).status
    const readyz = ((await (await fetch(`${service.httpUrl}/readyz`)).json()) as { status: string }).status
    return { grpc: all.status, ratelimit: ratelimit.status, healthcheck, readyz }
  } finally {
    client.close()
  }
}

const SERVING: Health = { grpc: 'SERVING', ratelimit: 'SERVING', healthcheck: 200, readyz: 'ready' }
const NOT_SERVING = { grpc: 'NOT_SERVING', ratelimit: 'NOT_SERVING', healthcheck: 500 }

/** Kills Redis (SIGKILL, no goodbye), waits for `whileDown`, restarts it on the same port and waits for SERVING. */
async function killAndRestart(redis: RedisProcess, service: RunningService, whileDown: (health: Health) => boolean): Promise<void> {
  await eventually(
    async () => isDeepEqual(await healthOf(service), SERVING),
    () => 'SERVING with Redis up',
  )
  process.kill(redis.pid, 'SIGKILL')
  let down: Health | undefined
  await eventually(
    async () => whileDown((down = await healthOf(service))),
    () => `the health of a dead Redis (last: ${JSON.stringify(down)})`,
  )
  await redis.restart()
  let up: Health | undefined
  await eventually(
    async () => isDeepEqual((up = await healthOf(service)), SERVING),
    () => `SERVING again (last: ${JSON.stringify(up)})`,
  )
}

function isDeepEqual(a: unknown, b: unknown): boolean {
  try {
    assert.deepEqual(a, b)
    return true
  } catch {
    return false
  }
}

describe('--health-check-store on a real Redis', () => {
  let redis: RedisProcess
  let service: Awaited<ReturnType<typeof startTestService>>
  before(async () => {
    redis = await startRedis()
    service = await startTestService(undefined, ['--redis', redis.url, '--redis-prefix', 'health:', '--health-check-store'])
  })
  after(async () => {
    await service?.stop()
    await redis?.stop()
  })

  it('is NOT_SERVING ("" and ratelimit) and /healthcheck 500 while Redis is dead, SERVING when it is back', {
    timeout: 60_000,
  }, async () => {
    await killAndRestart(redis, service, (health) => isDeepEqual(health, { ...NOT_SERVING, readyz: 'degraded' }))
  })
})

describe("upstream's REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", () => {
  let redis: RedisProcess
  let dir: string
  const services: RunningService[] = []
  const start = async (env: NodeJS.ProcessEnv) => {
    const rules = join(dir, 'rules.yaml')
    writeFileSync(rules, TEST_RULES)
    const base = { REDIS_URL: `${redis.host}:${redis.port}`, REDIS_SOCKET_TYPE: 'tcp', HOST: '127.0.0.1', PORT: '0', GRPC_PORT: '0' }
    const settings = readSettings(['--config', rules], { ...base, ...env })
    const service = await startService(settings, { logger: pino({ level: 'silent' }) })
    services.push(service)
    return service
  }
  before(async () => {
    redis = await startRedis()
    dir = mkdtempSync(join(tmpdir(), 'floodgate-health-'))
  })
  after(async () => {
    for (const service of services) await service.close()
    await redis?.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  it('=true: NOT_SERVING and 500 while Redis is dead, SERVING again when it answers', { timeout: 60_000 }, async () => {
    const service = await start({ REDIS_HEALTH_CHECK_ACTIVE_CONNECTION: 'true' })
    await killAndRestart(redis, service, (health) => isDeepEqual(health, { ...NOT_SERVING, readyz: 'degraded' }))
  })

  it('unset: health stays SERVING and /healthcheck 200 (only /readyz degrades), as upstream by default', { timeout: 60_000 }, async () => {
    const service = await start({})
    await killAndRestart(redis, service, (health) => isDeepEqual(health, { ...SERVING, readyz: 'degraded' }))
  })
})
