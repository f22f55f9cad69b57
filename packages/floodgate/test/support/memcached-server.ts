// Starts a throwaway memcached on a free loopback port for a test (TCP only, no UDP), and stops it afterwards.

import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { connect } from 'node:net'
import { freePort, pauseProcess, stopProcess, waitForPort } from './ports.js'

export interface MemcachedProcess {
  readonly host: string
  readonly port: number
  /** `host:port`, as MemcachedStore's `servers` takes it. */
  readonly address: string
  /** Stops the server (SIGTERM) and waits for it to exit; its data is gone. */
  stop(): Promise<void>
  /** Kills the server (SIGKILL: no goodbye on its sockets) and waits for it to exit; `restart` brings it back empty. */
  kill(): Promise<void>
  /** Starts it again on the same port (after `stop`), empty. */
  restart(): Promise<void>
  /** Freezes the process (SIGSTOP); resolves once every thread is stopped (see `pauseProcess`). */
  pause(): Promise<void>
  /** Lets a paused process run again (SIGCONT). */
  resume(): void
}

/** Starts `memcached -p PORT -l 127.0.0.1 -U 0` (Debian's `memcached` package), with `extra` arguments (e.g. `-Z` for TLS). */
export async function startMemcached(port?: number, extra: readonly string[] = []): Promise<MemcachedProcess> {
  const host = '127.0.0.1'
  const chosen = port ?? (await freePort())
  let child: ChildProcess | undefined

  async function launch(): Promise<void> {
    // memcached refuses to run as root unless told which user to be (CI containers run as root).
    const user = process.getuid?.() === 0 ? ['-u', 'root'] : []
    const args = ['-p', String(chosen), '-l', host, '-U', '0', '-m', '64', '-t', '2', ...user, ...extra]
    child = spawn('memcached', args, { stdio: ['ignore', 'ignore', 'inherit'] })
    child.unref()
    const started = child
    const exited = new Promise<never>((_, reject) =>
      started.once('error', (error) => reject(new Error(`memcached did not start (apt-get install memcached?): ${error.message}`))),
    )
    await Promise.race([waitForPort('memcached', host, chosen, 10_000), exited])
  }

  await launch()
  const handle: MemcachedProcess = {
    host,
    port: chosen,
    address: `${host}:${chosen}`,
    async stop() {
      const current = child
      child = undefined
      await stopProcess(current)
    },
    async kill() {
      const current = child
      child = undefined
      if (current === undefined || current.exitCode !== null || current.signalCode !== null) return
      const exited = new Promise<void>((resolve) => current.once('exit', () => resolve()))
      current.kill('SIGKILL')
      await exited
    },
    async restart() {
      await handle.stop()
      await launch()
    },
    async pause() {
      await pauseProcess('memcached', child)
    },
    resume() {
      child?.kill('SIGCONT')
    },
  }
  process.once('exit', () => child?.kill('SIGKILL'))
  return handle
}

/** Sends one admin command (`stats`, `lru_crawler metadump all`) over a connection of our own; answers the text up to END. */
export async function adminCommand(server: Pick<MemcachedProcess, 'host' | 'port'>, command: string): Promise<string> {
  const socket = connect(server.port, server.host)
  await once(socket, 'connect')
  socket.write(`${command}\r\n`)
  let text = ''
  for await (const chunk of socket) {
    text += String(chunk)
    if (text.endsWith('END\r\n')) break
  }
  socket.destroy()
  return text
}

/** Every key memcached holds (its own listing, URL-decoded), with its expiry as a Unix time (-1: none). */
export async function keysWithExpiry(server: Pick<MemcachedProcess, 'host' | 'port'>): Promise<Map<string, number>> {
  const text = await adminCommand(server, 'lru_crawler metadump all')
  return new Map([...text.matchAll(/^key=(\S+) exp=(-?\d+)/gm)].map((match) => [decodeURIComponent(match[1]), Number(match[2])]))
}
