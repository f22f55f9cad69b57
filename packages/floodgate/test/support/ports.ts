// What the throwaway servers of the tests (redis-server, memcached) share: a free loopback port,
// waiting for a server to listen on it, and stopping its process.

import type { ChildProcess } from 'node:child_process'
import { connect, createServer } from 'node:net'

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

/** Resolves once `host:port` accepts a connection; throws naming `what` after `timeoutMs`. */
export async function waitForPort(what: string, host: string, port: number, timeoutMs: number): Promise<void> {
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
    if (Date.now() > deadline) throw new Error(`${what} on ${host}:${port} did not start within ${timeoutMs}ms`)
    await new Promise((r) => setTimeout(r, 25))
  }
}

/** Stops a server's process (SIGCONT first, in case a test froze it; then SIGTERM) and waits for it to exit. */
export async function stopProcess(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return
  await new Promise<void>((resolve) => {
    child.once('exit', () => resolve())
    // The child is unref'd so it never holds a test open; while we wait for it, it must.
    child.ref()
    child.kill('SIGCONT')
    child.kill('SIGTERM')
  })
}
