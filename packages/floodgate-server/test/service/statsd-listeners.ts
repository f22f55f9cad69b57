// Real statsd servers for the tests: a UDP socket (DogStatsD's transport) and a TCP server (upstream's
// statsd sink's), each collecting the lines it receives.

import dgram from 'node:dgram'
import net from 'node:net'
import { once } from 'node:events'

export interface StatsdListener {
  readonly port: number
  /** Every line received so far, in order. */
  readonly lines: string[]
  /** Resolves once `done(lines)` holds (checked on every arrival and connection close); the test's timeout bounds the wait. */
  until(done: (lines: readonly string[]) => boolean): Promise<void>
  close(): Promise<void>
}

function collector() {
  const lines: string[] = []
  const waiters: { done: (lines: readonly string[]) => boolean; resolve: () => void }[] = []
  const add = (text: string) => {
    for (const line of text.split('\n')) if (line !== '') lines.push(line)
    for (const waiter of [...waiters]) {
      if (waiter.done(lines)) {
        waiters.splice(waiters.indexOf(waiter), 1)
        waiter.resolve()
      }
    }
  }
  const until = (done: (lines: readonly string[]) => boolean) =>
    done(lines) ? Promise.resolve() : new Promise<void>((resolve) => waiters.push({ done, resolve }))
  return { lines, add, until }
}

export async function udpStatsdListener(): Promise<StatsdListener> {
  const socket = dgram.createSocket('udp4')
  const { lines, add, until } = collector()
  socket.on('message', (message) => add(message.toString('utf8')))
  socket.bind(0, '127.0.0.1')
  await once(socket, 'listening')
  return {
    port: socket.address().port,
    lines,
    until,
    close: () => new Promise((resolve) => socket.close(() => resolve())),
  }
}

/** A TCP listener also counts the connections the client closed: after that, everything it sent is in. */
export async function tcpStatsdListener(): Promise<StatsdListener & { readonly closedConnections: () => number }> {
  const { lines, add, until } = collector()
  let closed = 0
  const sockets = new Set<net.Socket>()
  const server = net.createServer((socket) => {
    sockets.add(socket)
    let partial = ''
    socket.on('data', (chunk) => {
      // A line may be split across chunks: only whole lines are added.
      const text = partial + chunk.toString('utf8')
      const end = text.lastIndexOf('\n')
      partial = text.slice(end + 1)
      if (end >= 0) add(text.slice(0, end + 1))
    })
    socket.on('close', () => {
      sockets.delete(socket)
      closed++
      add('')
    })
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return {
    port: (server.address() as net.AddressInfo).port,
    lines,
    until,
    closedConnections: () => closed,
    close: () =>
      new Promise((resolve) => {
        for (const socket of sockets) socket.destroy()
        server.close(() => resolve())
      }),
  }
}

/** `name:value|type[|#tags]` lines as name → summed value, with their type and sorted tags kept in the key. */
export function countersOf(lines: readonly string[]): Map<string, number> {
  const counters = new Map<string, number>()
  for (const line of lines) {
    const match = /^([^:]+):([^|]+)\|c(?:\|#(.*))?$/.exec(line)
    if (match === null) continue
    const tags = match[3] === undefined ? '' : `|#${match[3].split(',').sort().join(',')}`
    const key = `${match[1]}${tags}`
    counters.set(key, (counters.get(key) ?? 0) + Number(match[2]))
  }
  return counters
}
