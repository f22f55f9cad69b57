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
  // A free port can be taken before redis-server binds it (another test's server, or an outgoing
  // connection's ephemeral port): then it exits at once. A port of our own choosing is chosen again.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startRedisOn(extraArgs, port ?? (await freePort()))
    } catch (error) {
      if (port !== undefined || attempt >= 3) throw error
    }
  }
}

async function startRedisOn(extraArgs: string[], chosen: number): Promise<RedisProcess> {
  const host = '127.0.0.1'
  const dir = mkdtempSync(join(tmpdir(), `floodgate-redis-${chosen}-`))
  let child: ChildProcess | undefined

  async function launch(): Promise<void> {
    child = spawn(
      'redis-server',
      ['--port', String(chosen), '--bind', host, '--save', '', '--appendonly', 'no', '--dir', dir, ...extraArgs],
      { stdio: ['ignore', 'ignore', 'inherit'] },
    )
    child.unref()
    try {
      await waitForPort('redis-server', host, chosen, 5_000)
    } catch (error) {
      // Never leave a server that came up late running past the test (it is unref'd).
      child.kill('SIGKILL')
      throw error
    }
  }

  try {
    await launch()
  } catch (error) {
    rmSync(dir, { recursive: true, force: true })
    throw error
  }
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
