// A plaintext gRPC connection gets an HTTP/2 session (and our SETTINGS) only once it sent the client
// preface: before, the server writes nothing to it, yet counts it toward the cap and its deadline, and
// sheds it first. Raw sockets show what the server wrote; the service's /metrics what it counted.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import http2 from 'node:http2'
import * as grpc from '@grpc/grpc-js'
import { loadRlsPackage } from '../../src/service/grpc-server.js'
import { scrape, startTestService, type TestService } from './helpers.js'

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1')
/** An empty SETTINGS frame: the client's first frame after the preface. */
const EMPTY_SETTINGS = Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0])

interface RawSocket {
  socket: Socket
  /** Every byte the server wrote so far. */
  received: () => Buffer
  isClosed: () => boolean
  /** Resolves, once the server closed the socket, with every byte it wrote. */
  closed: Promise<Buffer>
}

/** A connection to a TCP `port` (or a unix socket's path) that sends nothing of its own; resolves once connected. */
async function rawSocket(target: number | string): Promise<RawSocket> {
  const socket = typeof target === 'number' ? connect(target, '127.0.0.1') : connect(target)
  const chunks: Buffer[] = []
  let isClosed = false
  socket.on('data', (chunk: Buffer) => chunks.push(chunk))
  socket.on('error', () => {})
  const closed = new Promise<Buffer>((resolve) =>
    socket.once('close', () => {
      isClosed = true
      resolve(Buffer.concat(chunks))
    }),
  )
  await new Promise((resolve) => socket.once('connect', resolve))
  return { socket, received: () => Buffer.concat(chunks), isClosed: () => isClosed, closed }
}

async function until(probe: () => boolean | Promise<boolean>, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await probe())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

/** One health check by grpc-js on its own connection to `address` (host:port or unix:path); resolves with the status. */
async function healthOf(address: string): Promise<string> {
  const pkg = loadRlsPackage() as any
  const client = new pkg.grpc.health.v1.Health(address, grpc.credentials.createInsecure())
  try {
    return await new Promise<string>((resolve, reject) =>
      client.Check({ service: '' }, (error: Error | null, answer: { status: string }) => (error ? reject(error) : resolve(answer.status))),
    )
  } finally {
    client.close()
  }
}

const openGrpc = async (service: TestService) => (await scrape(service.httpUrl)).get('floodgate_connections{server="grpc"}') ?? 0
const closedOf = async (service: TestService, reason: string) =>
  (await scrape(service.httpUrl)).get(`floodgate_connections_closed_total{server="grpc",reason="${reason}"}`) ?? 0

/** A legitimate HTTP/2 client, connected and past the SETTINGS exchange. */
async function settledClient(port: number): Promise<{ client: http2.ClientHttp2Session; wasClosed: () => boolean }> {
  const client = http2.connect(`http://127.0.0.1:${port}`)
  client.on('error', () => {})
  let closed = false
  client.once('close', () => (closed = true))
  await new Promise<void>((resolve, reject) => {
    client.once('remoteSettings', () => resolve())
    client.once('close', () => reject(new Error('the client closed before the server settings')))
  })
  return { client, wasClosed: () => closed }
}

describe('gRPC: no HTTP/2 session before the client preface', () => {
  let service: TestService
  before(async () => {
    service = await startTestService()
  })
  after(async () => {
    await service?.stop()
  })

  it('writes nothing to a socket until its preface is complete, then SETTINGS', async () => {
    await settingsOnlyAfterPreface(service, await rawSocket(service.grpcPort))
  })

  it('closes a socket that sends something other than the preface, writing nothing', async () => {
    for (const garbage of ['GET / HTTP/1.1\r\nHost: floodgate\r\n\r\n', 'PRI * HTTP/1.1\r\n\r\nSM\r\n\r\n']) {
      const raw = await rawSocket(service.grpcPort)
      raw.socket.write(garbage)
      const received = await raw.closed
      assert.equal(received.length, 0, `answered ${JSON.stringify(garbage)} with ${received.toString('hex')}`)
    }
  })

  it('closes a socket whose first frame after the magic is not SETTINGS, writing nothing', async () => {
    const ping = Buffer.from([0, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8])
    // A SETTINGS frame on a stream, and one whose length is not a multiple of 6: malformed.
    const onStream = Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 1])
    const ragged = Buffer.from([0, 0, 5, 4, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0])
    for (const frame of [ping, onStream, ragged]) {
      const raw = await rawSocket(service.grpcPort)
      raw.socket.write(Buffer.concat([PREFACE, frame]))
      const received = await raw.closed
      assert.equal(received.length, 0, `answered ${frame.toString('hex')} with ${received.toString('hex')}`)
    }
  })

  it('holds a unix socket connection alike (--grpc-socket)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'floodgate-preface-'))
    const path = join(dir, 'rls.sock')
    const onSocket = await startTestService(undefined, ['--grpc-socket', path])
    try {
      await settingsOnlyAfterPreface(onSocket, await rawSocket(path))
    } finally {
      await onSocket.stop()
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

/**
 * Sends half the preface's magic on `raw`, then the rest of the magic, and checks each time the server
 * writes nothing (while it answers a call on another connection): the client preface ends with its
 * SETTINGS frame. Then sends an empty SETTINGS, and checks the server's SETTINGS come.
 */
async function settingsOnlyAfterPreface(service: TestService, raw: RawSocket): Promise<void> {
  try {
    // Half the magic: the server must keep waiting.
    raw.socket.write(PREFACE.subarray(0, 12))
    await until(async () => (await openGrpc(service)) >= 1, 'the socket counted as a gRPC connection')
    // A whole call on another connection: the server has long handled this socket's accept and bytes.
    assert.equal(await healthOf(service.grpcAddress), 'SERVING')
    assert.equal(raw.received().length, 0, `the server wrote ${raw.received().toString('hex')} before the preface`)
    assert.equal(raw.isClosed(), false)

    // The whole magic, no SETTINGS frame yet: still no session.
    raw.socket.write(PREFACE.subarray(12))
    assert.equal(await healthOf(service.grpcAddress), 'SERVING')
    assert.equal(raw.received().length, 0, `the server wrote ${raw.received().toString('hex')} before the client's SETTINGS`)
    assert.equal(raw.isClosed(), false)

    raw.socket.write(EMPTY_SETTINGS)
    await until(() => raw.received().length >= 9 || raw.isClosed(), 'the server SETTINGS')
    // The server's first frame: SETTINGS (type 4) on stream 0, not an ACK.
    const first = raw.received()
    assert.equal(first[3], 4, `first frame ${first.toString('hex')}`)
    assert.equal(first[4], 0)
    assert.equal(first.readUInt32BE(5), 0)
  } finally {
    raw.socket.destroy()
  }
}

describe('gRPC: --no-grpc-await-settings', () => {
  it('makes the session on the magic alone', async () => {
    const service = await startTestService(undefined, ['--no-grpc-await-settings'])
    const raw = await rawSocket(service.grpcPort)
    try {
      raw.socket.write(PREFACE)
      await until(() => raw.received().length >= 9 || raw.isClosed(), 'the server SETTINGS')
      assert.equal(raw.received()[3], 4, `first frame ${raw.received().toString('hex')}`)
    } finally {
      raw.socket.destroy()
      await service.stop()
    }
  })
})

describe('gRPC: sockets before their preface count toward the cap and the deadline', () => {
  const CAP = 5
  const RAW = 8

  it('sheds the sockets without a preface (or with the magic alone), not an established session, and writes them nothing', async () => {
    const service = await startTestService(undefined, ['--grpc-max-connections', String(CAP), '--grpc-handshake-timeout', '10m'])
    const raws: RawSocket[] = []
    try {
      const legit = await settledClient(service.grpcPort)
      for (let i = 0; i < RAW; i++) {
        const raw = await rawSocket(service.grpcPort)
        // Every other one sends the whole magic but no SETTINGS frame: still no session.
        if (i % 2 === 1) raw.socket.write(PREFACE)
        raws.push(raw)
      }
      // 1 + RAW connections over a cap of CAP: the oldest RAW - CAP + 1 sockets without a preface go.
      const shed = RAW - CAP + 1
      await until(() => raws.filter((raw) => raw.isClosed()).length >= shed, `${shed} sockets shed`)
      await until(async () => (await openGrpc(service)) === CAP, `${CAP} gRPC connections open`)
      assert.equal(await closedOf(service, 'cap'), shed)
      assert.equal(legit.wasClosed(), false, 'the established session was shed')
      // Still alive: it answers a ping.
      await new Promise<void>((resolve, reject) => legit.client.ping((error) => (error ? reject(error) : resolve())))
      for (const [i, raw] of raws.entries())
        assert.equal(raw.received().length, 0, `socket ${i} was written ${raw.received().toString('hex')}`)
      legit.client.close()
    } finally {
      for (const raw of raws) raw.socket.destroy()
      await service.stop()
    }
  })

  it('cuts a socket that sends no preface by the handshake deadline, writing nothing', async () => {
    const service = await startTestService(undefined, ['--grpc-handshake-timeout', '200ms'])
    try {
      const raw = await rawSocket(service.grpcPort)
      const received = await raw.closed
      assert.equal(received.length, 0, `the server wrote ${received.toString('hex')}`)
      assert.ok((await closedOf(service, 'handshake')) >= 1)
    } finally {
      await service.stop()
    }
  })

  it('destroys sockets still without a preface on shutdown', async () => {
    const service = await startTestService(undefined, ['--grpc-handshake-timeout', '10m'])
    const raw = await rawSocket(service.grpcPort)
    try {
      raw.socket.write(PREFACE.subarray(0, 5))
      await until(async () => (await openGrpc(service)) === 1, 'the socket counted')
    } finally {
      await service.stop()
    }
    await raw.closed
  })
})
