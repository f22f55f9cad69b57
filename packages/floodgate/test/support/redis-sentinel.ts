// Starts a throwaway Sentinel setup (one master, one replica, one sentinel) on free loopback ports
// for a test, and stops it afterwards.

import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort, startRedis, withClient, type RedisProcess } from './redis-server.js'

export interface SentinelSetup {
  /** The name the sentinel monitors the master under. */
  readonly name: string
  readonly master: RedisProcess
  readonly replica: RedisProcess
  /** What `new Redis({ sentinels, name })` needs. */
  readonly sentinels: readonly { host: string; port: number }[]
  /** The port of the master the sentinel currently reports. */
  currentMasterPort(): Promise<number>
  /** Stops the sentinel, the replica and the master. */
  stop(): Promise<void>
}

const HOST = '127.0.0.1'

/** `password`: requirepass and masterauth on the master and replica (the Sentinel is told it); `sentinelPassword`: the Sentinel's own. */
export interface SentinelAuth {
  password?: string
  sentinelPassword?: string
}

/**
 * Starts a master, a replica of it and one sentinel (quorum 1, down-after 1s), and waits until the
 * replica is in sync and the sentinel knows both.
 */
export async function startSentinel(name = 'mymaster', timeoutMs = 20_000, auth: SentinelAuth = {}): Promise<SentinelSetup> {
  const { password, sentinelPassword } = auth
  const nodeAuth = password === undefined ? [] : ['--requirepass', password, '--masterauth', password]
  const master = await startRedis(nodeAuth)
  const replica = await startRedis(['--replicaof', HOST, String(master.port), ...nodeAuth])
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), `floodgate-sentinel-${port}-`))
  const config = join(dir, 'sentinel.conf')
  // Sentinel rewrites its config file as it learns, so it must be a writable file of its own.
  writeFileSync(
    config,
    [
      `port ${port}`,
      `bind ${HOST}`,
      `dir ${dir}`,
      `sentinel monitor ${name} ${HOST} ${master.port} 1`,
      `sentinel down-after-milliseconds ${name} 1000`,
      `sentinel failover-timeout ${name} 5000`,
      // Quoted: a config file splits values at spaces (JSON's escapes are the config file's own).
      ...(password === undefined ? [] : [`sentinel auth-pass ${name} ${JSON.stringify(password)}`]),
      ...(sentinelPassword === undefined ? [] : [`requirepass ${JSON.stringify(sentinelPassword)}`]),
      '',
    ].join('\n'),
  )
  const child: ChildProcess = spawn('redis-server', [config, '--sentinel'], { stdio: ['ignore', 'ignore', 'inherit'] })
  child.unref()
  process.once('exit', () => {
    child.kill('SIGKILL')
    rmSync(dir, { recursive: true, force: true })
  })

  const stopSentinel = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return
    await new Promise<void>((resolve) => {
      child.once('exit', () => resolve())
      child.ref()
      child.kill('SIGTERM')
    })
  }
  const stop = async (): Promise<void> => {
    await stopSentinel()
    await Promise.all([replica.stop(), master.stop()])
  }

  const currentMasterPort = async (): Promise<number> =>
    withClient(
      port,
      async (redis) => {
        const [, masterPort] = (await redis.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', name)) as [string, string]
        return Number(masterPort)
      },
      sentinelPassword,
    )

  try {
    await waitFor('the replica to sync and the sentinel to see it', timeoutMs, async () => {
      const inSync = await withClient(
        replica.port,
        async (redis) => /master_link_status:up/.test(await redis.info('replication')),
        password,
      )
      const replicas = (await withClient(port, (redis) => redis.call('SENTINEL', 'REPLICAS', name), sentinelPassword)) as unknown[]
      return inSync && replicas.length === 1 && (await currentMasterPort()) === master.port
    })
  } catch (error) {
    await stop()
    throw error
  }
  return { name, master, replica, sentinels: [{ host: HOST, port }], currentMasterPort, stop }
}

async function waitFor(what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (await check().catch(() => false)) return
    if (Date.now() > deadline) throw new Error(`Redis Sentinel: gave up after ${timeoutMs}ms waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}
