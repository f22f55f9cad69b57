// Starts a throwaway redis-server on a free loopback port for a test, and stops it afterwards.
// Never touches the machine's own Redis on 6379.

import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer, connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

export interface RedisProcess {
  readonly host: string
  readonly port: number
  readonly url: string
  readonly dir: string
  /** Stops the server (SIGTERM) and waits for it to exit. */
  stop(): Promise<void>
  /** Starts it again on the same port (after `stop`), empty. */
  restart(): Promise<void>
}

/** A free TCP port on 127.0.0.1, as the OS hands it out (never 6379). */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = await new Promise<number>((resolve, reject) => {
      const server = createServer()
      server.once('error', reject)
      server.listen(0, '127.0.0.1', () => {
        const address = server.address()
        server.close(() => resolve(typeof address === 'object' && address ? address.port : 0))
      })
    })
    // Cluster nodes also use port + 10000 for their bus: keep room for it.
    if (port !== 6379 && port < 55000) return port
  }
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
    await waitForPort(host, chosen, 5_000)
  }

  await launch()
  const handle: RedisProcess = {
    host,
    port: chosen,
    url: `redis://${host}:${chosen}`,
    dir,
    async stop() {
      const current = child
      child = undefined
      if (!current || current.exitCode !== null || current.signalCode !== null) return
      await new Promise<void>((resolve) => {
        current.once('exit', () => resolve())
        // The child is unref'd so it never holds a test open; while we wait for it, it must.
        current.ref()
        current.kill('SIGTERM')
      })
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

async function waitForPort(host: string, port: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = connect(port, host)
      socket.once('connect', () => {
        socket.end()
        resolve(true)
      })
      socket.once('error', () => resolve(false))
    })
    if (ok) return
    if (Date.now() > deadline) throw new Error(`redis-server on ${host}:${port} did not start within ${timeoutMs}ms`)
    await new Promise((r) => setTimeout(r, 25))
  }
}
