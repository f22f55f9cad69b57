// At the connection cap, a flood from one address sheds that address's own sockets, not a legitimate
// client's older idle one: the attacker connects from 127.0.0.2, the client from 127.0.0.1 (all of
// loopback's /8 reaches a server on 127.0.0.1). Without the per-address share the server shed the
// socket idle the longest, which is the legitimate client's.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { connect, type Socket } from 'node:net'
import http2 from 'node:http2'
import { startTestService, type TestService } from './helpers.js'

const CAP = 20
const ATTACKERS = 40

/**
 * Opens `count` sockets from `localAddress`, each connected (and, given `reply`, answered with bytes that
 * contain it) before the next; resolves once all are.
 */
async function openFrom(
  port: number,
  localAddress: string,
  count: number,
  send?: Buffer,
  reply?: Buffer,
): Promise<{ sockets: Socket[]; closed: () => number }> {
  const sockets: Socket[] = []
  let closed = 0
  for (let i = 0; i < count; i++) {
    const socket = connect({ port, host: '127.0.0.1', localAddress })
    socket.on('error', () => {})
    socket.on('data', () => {})
    socket.once('close', () => closed++)
    await new Promise<void>((resolve) => {
      socket.once('connect', () => resolve())
      socket.once('close', () => resolve())
    })
    if (send !== undefined) socket.write(send)
    if (reply !== undefined) {
      let read = Buffer.alloc(0)
      await new Promise<void>((resolve) => {
        socket.on('data', (chunk: Buffer) => {
          read = Buffer.concat([read, chunk])
          if (read.includes(reply)) resolve()
        })
        socket.once('close', () => resolve())
      })
    }
    sockets.push(socket)
  }
  return { sockets, closed: () => closed }
}

async function until(probe: () => boolean, what: () => string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!probe()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what()}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

/** One HTTP/1.1 keep-alive request on `socket`; resolves with the status line. */
function requestOn(socket: Socket): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = ''
    const onData = (chunk: Buffer) => {
      text += chunk.toString('latin1')
      if (text.includes('\r\n\r\n')) {
        socket.off('data', onData)
        resolve(text.slice(0, text.indexOf('\r\n')))
      }
    }
    socket.on('data', onData)
    socket.once('close', () => reject(new Error(`socket closed (read ${JSON.stringify(text)})`)))
    socket.write('GET /healthz HTTP/1.1\r\nHost: floodgate\r\n\r\n')
  })
}

describe('per-address share at the connection cap', () => {
  let service: TestService
  before(async () => {
    service = await startTestService(undefined, ['--max-connections', String(CAP), '--grpc-max-connections', String(CAP)])
  })
  after(async () => {
    await service?.stop()
  })

  it('HTTP: the flooding address loses its own idle sockets; the older legitimate keep-alive one stays', async () => {
    const legit = await openFrom(service.httpPort, '127.0.0.1', 1)
    const socket = legit.sockets[0]
    try {
      assert.match(await requestOn(socket), /^HTTP\/1\.1 200/)
      // The legitimate socket is now the one idle the longest; the attacker fills the cap twice over.
      const attack = await openFrom(service.httpPort, '127.0.0.2', ATTACKERS)
      try {
        await until(
          () => attack.closed() >= ATTACKERS - CAP + 1,
          () => `the attacker's sockets shed (${attack.closed()} closed)`,
        )
        assert.equal(legit.closed(), 0, 'the legitimate socket was shed')
        assert.match(await requestOn(socket), /^HTTP\/1\.1 200/)
      } finally {
        for (const s of attack.sockets) s.destroy()
      }
    } finally {
      socket.destroy()
    }
  })

  it('gRPC: the flooding address loses its own idle sessions; the older legitimate one stays', async () => {
    const client = http2.connect(`http://127.0.0.1:${service.grpcPort}`)
    client.on('error', () => {})
    let legitClosed = false
    client.once('close', () => (legitClosed = true))
    try {
      await new Promise<void>((resolve, reject) => {
        client.once('remoteSettings', () => resolve())
        client.once('close', () => reject(new Error('the legitimate session closed before its settings')))
      })
      // Complete idle sessions from the attacker: the preface and an empty SETTINGS frame, each
      // acknowledged by the server (so idle there, not awaiting its preface) before the next.
      const session = Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0])])
      const settingsAck = Buffer.from([0, 0, 0, 4, 1, 0, 0, 0, 0])
      const attack = await openFrom(service.grpcPort, '127.0.0.2', ATTACKERS, session, settingsAck)
      try {
        await until(
          () => attack.closed() >= ATTACKERS - CAP + 1,
          () => `the attacker's sessions shed (${attack.closed()} closed)`,
        )
        assert.equal(legitClosed, false, 'the legitimate session was shed')
        assert.equal(client.closed || client.destroyed, false)
      } finally {
        for (const s of attack.sockets) s.destroy()
      }
    } finally {
      client.close()
    }
  })
})
