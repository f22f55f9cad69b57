// What the throwaway servers of the tests (redis-server, memcached) share: a free loopback port,
// waiting for a server to listen on it, freezing its process, and stopping it.

import type { ChildProcess } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
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

/**
 * Freezes a server's process (SIGSTOP): its connections stay open and nothing answers. Resolves once
 * every thread is stopped: the signal lands asynchronously, and on a busy machine a thread (memcached's
 * workers, redis-server's io and bio threads) may still answer a request sent just after kill()
 * returns. Throws, naming `what`, when the process is not running or is not stopped within 5 s.
 */
export async function pauseProcess(what: string, child: ChildProcess | undefined): Promise<void> {
  const pid = child?.pid
  if (child === undefined || pid === undefined || child.exitCode !== null || child.signalCode !== null) {
    throw new Error(`${what} is not running: there is nothing to pause`)
  }
  child.kill('SIGSTOP')
  const deadline = performance.now() + 5_000
  for (;;) {
    const states = threadStates(what, pid)
    if (states.every(({ state }) => state === 'T' || state === 't')) return
    if (performance.now() > deadline) {
      const listed = states.map(({ tid, state }) => `${tid}:${state}`).join(' ')
      throw new Error(`${what} (pid ${pid}) was not stopped 5 s after SIGSTOP; its threads' states: ${listed}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

/** The state letter of each thread of `pid` (R, S, D, T...), from /proc/PID/task/TID/stat. */
function threadStates(what: string, pid: number): { tid: string; state: string }[] {
  let tids: string[]
  try {
    tids = readdirSync(`/proc/${pid}/task`)
  } catch (error) {
    throw new Error(`${what} (pid ${pid}) exited while being paused: ${(error as Error).message}`)
  }
  return tids.flatMap((tid) => {
    let stat: string
    try {
      stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8')
    } catch {
      return [] // the thread ended since the listing: it can answer nothing
    }
    // The name in parentheses may hold spaces and parentheses; the state follows the last ')'.
    return [{ tid, state: stat.charAt(stat.lastIndexOf(')') + 2) }]
  })
}
