// Write-back on a real redis-server that is paused (SIGSTOP, CLIENT PAUSE) or killed (SIGKILL, with an
// fsync-always AOF so the server comes back with what it acknowledged): decisions go on locally, and
// once the server answers again the store holds every admitted unit exactly once.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { createPolicies } from '../../../src/core/policy.js'
import { RedisStore } from '../../../src/redis.js'
import { WriteBack } from '../../../src/limiter/sync/write-back.js'
import { useRedis } from '../../support/redis-store.js'

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))
// A day's window: no run straddles its end (a test never depends on the wall clock's position).
const policies = createPolicies([{ algorithm: 'fixed-window', limit: 1_000_000, period: '1d', sync: 'write-back', flushMs: 20 }])

function decide(writeBack: WriteBack, key: string): Promise<boolean> {
  return new Promise((resolve, reject) => {
    writeBack.decide(key, policies, 1, (error, response) => (error ? reject(error) : resolve(response!.allowed)))
  })
}

async function storedCount(store: RedisStore, key: string): Promise<number> {
  const [response] = await store.merge([{ key, policies, units: 0 }])
  return response.records[0].state?.[1] ?? 0
}

/** Flushes until nothing is left to send, however many tries a returning server needs. */
async function drain(writeBack: WriteBack): Promise<void> {
  for (let i = 0; i < 200 && writeBack.unsynced > 0; i++) {
    await writeBack.flush()
    await sleep(10)
  }
  assert.equal(writeBack.unsynced, 0, 'every unit reached the store')
}

describe('write-back when the store is paused or killed', () => {
  const redis = useRedis(['--appendonly', 'yes', '--appendfsync', 'always'])

  for (const pause of ['SIGSTOP', 'CLIENT PAUSE'] as const) {
    it(`${pause}: a flush that times out while its request waits in the server is applied once`, async () => {
      const store = new RedisStore({ url: redis.server.url, prefix: `pause-${pause === 'SIGSTOP' ? 's' : 'c'}:` })
      const writeBack = new WriteBack({ store, timeoutMs: 50 })
      let admitted = 0
      try {
        for (let i = 0; i < 20; i++) if (await decide(writeBack, 'k')) admitted++
        await drain(writeBack)
        if (pause === 'SIGSTOP') await redis.server.pause()
        else await redis.admin.call('CLIENT', 'PAUSE', '400', 'ALL')
        // Decisions go on from the local copy; flushes time out, their requests queued in the server.
        for (let round = 0; round < 10; round++) {
          for (let i = 0; i < 7; i++) if (await decide(writeBack, 'k')) admitted++
          await writeBack.flush()
        }
        assert.ok(writeBack.stats.failed > 0, 'flushes timed out during the pause')
        if (pause === 'SIGSTOP') redis.server.resume()
        await drain(writeBack)
        assert.equal(await storedCount(store, 'k'), admitted, 'every admitted unit once: none lost, none doubled')
        assert.ok(writeBack.stats.replays > 0, 'a resent flush was recognised as applied already')
      } finally {
        redis.server.resume()
        await writeBack.close()
        await store.close()
      }
    })
  }

  it('SIGKILL and restart: decisions go on locally, and the units go once the server is back', async () => {
    const store = new RedisStore({ url: redis.server.url, prefix: 'kill:' })
    const writeBack = new WriteBack({ store, timeoutMs: 50 })
    let admitted = 0
    try {
      for (const key of ['a', 'b', 'c']) for (let i = 0; i < 10; i++) if (await decide(writeBack, key)) admitted++
      await drain(writeBack)
      process.kill(redis.server.pid, 'SIGKILL')
      for (let round = 0; round < 10; round++) {
        for (const key of ['a', 'b', 'c', 'new']) if (await decide(writeBack, key)) admitted++
        await writeBack.flush()
      }
      assert.equal(admitted, 70, 'every decision was made locally while the server was down')
      assert.ok(writeBack.stats.failed > 0)
      await redis.server.restart()
      await drain(writeBack)
      let stored = 0
      for (const key of ['a', 'b', 'c', 'new']) stored += await storedCount(store, key)
      assert.equal(stored, admitted, 'every admitted unit once: none lost, none doubled')
    } finally {
      await writeBack.close()
      await store.close()
    }
  })
})
