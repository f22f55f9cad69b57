// The deadline sweep closes at most --grpc-close-batch connections per event-loop turn: thousands of flood
// sockets reaching their handshake deadline together are closed over many turns, with the calls' I/O run
// between them, not in one turn that blocks every call. Real sockets on a real listener; the sweep is
// called with a `now` past every deadline, so nothing depends on the clock.

import { afterEach, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import http2 from 'node:http2'
import { connect, createServer, type Server, type Socket } from 'node:net'
import { setImmediate as nextTurn } from 'node:timers/promises'
import { GrpcConnections } from '../../src/service/grpc-connections.js'

const LIMITS = { maxConnections: 1_000, idleTimeoutMs: 60_000, handshakeTimeoutMs: 60_000, keepaliveMinTimeMs: 60_000 }

/** A listener, and `count` client sockets connected to it; resolves with the server's side of each. */
async function acceptedSockets(count: number): Promise<{ listener: Server; accepted: Socket[]; clients: Socket[] }> {
  const accepted: Socket[] = []
  const listener = createServer((socket) => {
    socket.on('error', () => {})
    accepted.push(socket)
  })
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve))
  const { port } = listener.address() as { port: number }
  const clients = Array.from({ length: count }, () => connect(port, '127.0.0.1').on('error', () => {}))
  while (accepted.length < count) await new Promise((resolve) => listener.once('connection', resolve))
  return { listener, accepted, clients }
}

describe('GrpcConnections: the sweep closes in batches', () => {
  const cleanups: (() => void)[] = []
  afterEach(() => {
    for (const cleanup of cleanups.splice(0)) cleanup()
  })

  it('closes at most closeBatch due sockets per turn, and the rest in the turns after', async () => {
    const { listener, accepted, clients } = await acceptedSockets(5)
    const connections = new GrpcConnections(http2.createServer(), { ...LIMITS, closeBatch: 2 })
    cleanups.push(() => {
      connections.stop()
      for (const socket of [...accepted, ...clients]) socket.destroy()
      listener.close()
    })
    for (const socket of accepted) connections.accepted(socket)
    const destroyed = () => accepted.filter((socket) => socket.destroyed).length

    connections.sweep(performance.now() + LIMITS.handshakeTimeoutMs * 2)
    assert.equal(destroyed(), 2, 'the first turn closes one batch')
    assert.equal(connections.size, 3)
    // The oldest first: the sweep runs in the order of the deadlines.
    assert.deepEqual(
      accepted.map((socket) => socket.destroyed),
      [true, true, false, false, false],
    )
    await nextTurn()
    assert.equal(destroyed(), 4, 'the next turn, the next batch')
    await nextTurn()
    assert.equal(destroyed(), 5)
    assert.equal(connections.size, 0)
    assert.equal(connections.shed.handshake, 5)
  })

  it('takes a batch below 1 as 1, so a sweep never reschedules itself closing nothing', async () => {
    const { listener, accepted, clients } = await acceptedSockets(2)
    const connections = new GrpcConnections(http2.createServer(), { ...LIMITS, closeBatch: 0 })
    cleanups.push(() => {
      connections.stop()
      for (const socket of [...accepted, ...clients]) socket.destroy()
      listener.close()
    })
    for (const socket of accepted) connections.accepted(socket)
    connections.sweep(performance.now() + LIMITS.handshakeTimeoutMs * 2)
    assert.equal(connections.size, 1)
    await nextTurn()
    assert.equal(connections.size, 0)
  })

  it('closes nothing not yet due, whatever the batch', async () => {
    const { listener, accepted, clients } = await acceptedSockets(3)
    const connections = new GrpcConnections(http2.createServer(), { ...LIMITS, closeBatch: 1 })
    cleanups.push(() => {
      connections.stop()
      for (const socket of [...accepted, ...clients]) socket.destroy()
      listener.close()
    })
    for (const socket of accepted) connections.accepted(socket)
    connections.sweep(performance.now())
    await nextTurn()
    await nextTurn()
    assert.equal(connections.size, 3)
    assert.equal(connections.shed.handshake, 0)
  })
})
