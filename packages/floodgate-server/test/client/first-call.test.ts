// The SDK's first call of a process: with the documented `timeout: '100ms'` it used to fail open,
// because opening the first connection alone outlasted the decision budget. Here the real service
// sits behind a TCP gate that holds new connections until the test lets them through, so a slow
// connection is injected rather than waited for.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { connect, createServer, type Server, type Socket } from 'node:net'
import { FloodgateClient } from 'floodgate/client'
import { startTestService, type TestService } from '../service/helpers.js'

/** A TCP proxy to the service that holds every new connection while the gate is closed. */
interface Gate {
  url: string
  /** Connections the proxy has been offered so far. */
  readonly connections: number
  /** Resolves when the n-th connection has arrived. */
  arrived(n: number): Promise<void>
  /** Lets held and later connections through. */
  open(): void
  /** Holds connections that arrive from now on. */
  close(): void
  stop(): Promise<void>
}

async function gateTo(port: number): Promise<Gate> {
  let isOpen = false
  let count = 0
  const held: Socket[] = []
  const sockets = new Set<Socket>()
  const waiters: { n: number; resolve: () => void }[] = []
  const pass = (client: Socket) => {
    const upstream = connect(port, '127.0.0.1')
    sockets.add(upstream)
    client.pipe(upstream).pipe(client)
    client.on('error', () => upstream.destroy())
    upstream.on('error', () => client.destroy())
    client.resume()
  }
  const server: Server = createServer({ pauseOnConnect: true }, (client) => {
    count++
    sockets.add(client)
    if (isOpen) pass(client)
    else held.push(client)
    for (const waiter of waiters.filter((w) => count >= w.n)) waiter.resolve()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    get connections() {
      return count
    },
    arrived: (n) => (count >= n ? Promise.resolve() : new Promise((resolve) => waiters.push({ n, resolve }))),
    open() {
      isOpen = true
      for (const client of held.splice(0)) pass(client)
    },
    close() {
      isOpen = false
    },
    stop: () =>
      new Promise((resolve) => {
        for (const socket of sockets) socket.destroy()
        server.close(() => resolve())
      }),
  }
}

describe('FloodgateClient: the first call of a process', () => {
  let service: TestService
  before(async () => {
    service = await startTestService()
  })
  after(async () => {
    await service.stop()
  })

  const request = (value: string) => ({ domain: 'test', descriptors: [[{ key: 'user', value }]] })
  // Long enough for any answer on a busy machine (the point is the connection, which the gate holds
  // for as long as the test likes), short enough to keep the test quick.
  const TIMEOUT_MS = 1_000

  it('is answered, not failed open, when connecting outlasts the decision timeout', async () => {
    const gate = await gateTo(service.httpPort)
    const client = new FloodgateClient({ url: gate.url, timeout: TIMEOUT_MS, connectTimeout: '60s' })
    try {
      // The first check starts at once, while its connection is still held at the gate.
      const first = client.check(request('first-call'))
      await gate.arrived(1)
      // Held for three decision budgets (longer on a busy machine, which only makes the case stronger).
      await new Promise((resolve) => AbortSignal.timeout(3 * TIMEOUT_MS).addEventListener('abort', resolve))
      gate.open()
      const result = await first
      assert.equal(result.error, undefined)
      assert.equal(result.allowed, true)
      assert.equal(result.results[0].rule, 'test.user')
    } finally {
      client.close()
      await gate.stop()
    }
  })

  it('runs on the connection opened at construction; a new one is not needed', async () => {
    const gate = await gateTo(service.httpPort)
    gate.open()
    const client = new FloodgateClient({ url: gate.url, timeout: TIMEOUT_MS })
    try {
      await client.ready()
      // From now on a new connection would wait at the gate for good, and fail the check.
      gate.close()
      for (let i = 0; i < 3; i++) {
        const result = await client.check(request('warm'))
        assert.equal(result.error, undefined)
      }
      assert.equal(gate.connections, 1)
    } finally {
      client.close()
      await gate.stop()
    }
  })

  it('with warm: false, opens no connection until the first check', async () => {
    const gate = await gateTo(service.httpPort)
    gate.open()
    const client = new FloodgateClient({ url: gate.url, timeout: '2s', warm: false })
    try {
      await client.ready()
      assert.equal(gate.connections, 0)
      assert.equal((await client.check(request('cold'))).error, undefined)
      assert.equal(gate.connections, 1)
    } finally {
      client.close()
      await gate.stop()
    }
  })

  it('rejects bad connect options by name', () => {
    assert.throws(() => new FloodgateClient({ url: 'http://x', connectTimeout: 'soon' as never }), /^TypeError: connectTimeout: expected/)
    assert.throws(() => new FloodgateClient({ url: 'http://x', warm: 'yes' as never }), /^TypeError: warm: expected true or false/)
  })
})
