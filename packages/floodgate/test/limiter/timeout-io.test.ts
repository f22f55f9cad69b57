// A timer that fires late must not time out an answer already waiting to be read (issue 26 §3): a
// busy process runs its due timers before it polls its sockets, so the expiry first lets the event
// loop read the I/O that came in time.

import assert from 'node:assert/strict'
import { connect } from 'node:net'
import { once } from 'node:events'
import { after, before, describe, it } from 'node:test'
import { Timeouts } from '../../src/limiter/timeout.js'
import { startRedis, type RedisProcess } from '../support/redis-server.js'

/** Blocks this thread for `ms`, as a busy process does (no timer, no I/O runs meanwhile). */
function block(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)
}

describe('Timeouts on a busy process', () => {
  let server: RedisProcess
  before(async () => {
    server = await startRedis()
  })
  after(async () => {
    await server?.stop()
  })

  it('settles a call whose answer arrived while the process was busy past its deadline', async () => {
    const socket = connect(server.port, server.host)
    await once(socket, 'connect')
    try {
      const timeouts = new Timeouts(50)
      const outcome = new Promise<string>((resolve) => {
        // From a setImmediate (the check phase): the next phases are the timers', then the poll that reads sockets.
        setImmediate(() => {
          const entry = timeouts.start(() => resolve('timed out'))
          socket.once('data', () => resolve(timeouts.settle(entry) ? 'answered' : 'answered late'))
          socket.write('PING\r\n')
          // Busy well past the 50 ms deadline; Redis, another process, answers meanwhile.
          block(1_000)
        })
      })
      assert.equal(await outcome, 'answered')
    } finally {
      socket.destroy()
    }
  })
})
