// Starts a throwaway redis-server on a free loopback port for a test, and stops it afterwards.
// Never touches the machine's own Redis on 6379.

import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { freePort, pauseProcess, stopProcess, waitForPort } from './ports.js'

export { freePort } from './ports.js'

export interface RedisProcess {
  readonly host: string
  readonly port: number
  readonly url: string
  readonly dir: string
  /** The running server's process id (a new one after `restart`), e.g. to SIGKILL it. */
  readonly pid: number
  /**
   * Freezes the server (SIGSTOP): connections stay open and nothing answers. Resolves once every
   * thread (the io and bio threads too) is stopped, so a request sent next is not answered.
   */
  pause(): Promise<void>
  /** Lets a paused server run again (SIGCONT). */
  resume(): void
  /** Stops the server (SIGTERM) and waits for it to exit. */
  stop(): Promise<void>
  /** Starts it again on the same port (after `stop`), empty. */
  restart(): Promise<void>
}

/** Starts redis-server with no persistence; `extraArgs` are passed through (e.g. cluster options). */
export async function startRedis(extraArgs: string[] = [], port?: number): Promise<RedisProcess> {
  const host = '127.0.0.1'
  const chosen = port ?? (await freePort())
  const dir = mkdtempSync(join(tmpdir(), `floodgate-redis-${chosen}-`))
  let child: ChildProcess | undefined

  async function launch(): Promise<void> {
    child = spawn(
      'redis-server',
      ['--port', String(chosen), '--bind', host, '--save', '', '--appendonly', 'no', '--dir', dir, ...extraArgs],
      { stdio: ['ignore', 'ignore', 'inherit'] },
    )
    child.unref()
    await waitForPort('redis-server', host, chosen, 5_000)
  }

  await launch()
  const handle: RedisProcess = {
    host,
    port: chosen,
    url: `redis://${host}:${chosen}`,
    dir,
    get pid() {
      if (child?.pid === undefined) throw new Error(`redis-server on port ${chosen} is not running: it has no pid`)
      return child.pid
    },
    async pause() {
      await pauseProcess(`redis-server on port ${chosen}`, child)
    },
    resume() {
      child?.kill('SIGCONT')
    },
    async stop() {
      const current = child
      child = undefined
      await stopProcess(current)
    },
    async restart() {
      await handle.stop()
      await launch()
    },
  }
  process.once('exit', () => {
    child?.kill('SIGKILL')
    rmSync(dir, { recursive: true, force: true })
  })
  return handle
}

/** Runs `work` with a short-lived plain connection to one Redis on 127.0.0.1 (authenticated with `password`, if given). */
export async function withClient<T>(port: number, work: (redis: Redis) => Promise<T>, password?: string): Promise<T> {
  const redis = new Redis({
    host: '127.0.0.1',
    port,
    password,
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 1000,
  })
  redis.on('error', () => {})
  try {
    await redis.connect()
    return await work(redis)
  } finally {
    redis.disconnect()
  }
}
