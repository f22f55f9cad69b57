// A hung Redis (SIGSTOP, CLIENT PAUSE) runs the calls queued meanwhile when it resumes: those whose
// callers were already answered by the fallback must charge nothing.

import { beforeEach, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import { createPolicies } from '../../../src/core/policy.js'
import { FloodgateError } from '../../../src/core/errors.js'
import { RateLimiter } from '../../../src/index.js'
import { RedisStore } from '../../../src/redis.js'
import { readRecord } from './records.js'
import { useRedis } from '../../support/redis-store.js'
import { startCluster } from '../../support/redis-cluster.js'
import { policyId } from '../../../src/stores/redis/keys.js'

const LIMIT = 100
// A day's window: a test spans a few seconds on a busy machine, and a window that ended between its
// first call and its last look would read as a charge lost (one minute's did, once in a loaded run).
const policyOptions = [{ name: 'day', algorithm: 'fixed-window' as const, limit: LIMIT, period: '1d' as const }]
const policies = createPolicies(policyOptions)

const redis = useRedis()

beforeEach(async () => {
  await redis.admin.flushall()
})

/** A way to hang the server and to let it go again. */
interface Hang {
  readonly name: string
  hang(): Promise<void>
  resume(): Promise<void>
}

const HANGS: Hang[] = [
  {
    name: 'SIGSTOP',
    hang: () => redis.server.pause(),
    resume: async () => redis.server.resume(),
  },
  {
    // WRITE: scripts wait, while the admin's CLIENT UNPAUSE (not a write) still goes through.
    name: 'CLIENT PAUSE',
    hang: async () => void (await redis.admin.call('CLIENT', 'PAUSE', '600000', 'WRITE')),
    resume: async () => void (await redis.admin.call('CLIENT', 'UNPAUSE')),
  },
]

/** What the store charged `key` (0 when it holds no record). */
async function charged(key: string): Promise<number> {
  const record = await readRecord(redis.admin, `fg:{${key}}:${policyId('day')}:fw`)
  return record === null ? 0 : record.state![1]
}

/** A limiter that denies while the store does not answer (`serve --on-store-error closed`), on real timers. */
function closedLimiter(store: RedisStore): RateLimiter {
  return new RateLimiter({ store, policies: policyOptions, timeout: '200ms', onStoreError: 'closed', breaker: { failures: 1000 } })
}

for (const { name, hang, resume } of HANGS) {
  describe(`a server hung by ${name}`, () => {
    test('a call reaching it past its deadline charges nothing and is answered STORE_TIMEOUT; one within it is charged', async () => {
      const store = new RedisStore({ url: redis.server.url })
      try {
        await store.evaluate([{ key: 'warm', policies, cost: 1 }]) // the store learns the server's clock from the reply
        await hang()
        const late = store.evaluate([{ key: 'late', policies, cost: 1, deadline: performance.now() + 20 }])
        late.catch(() => {})
        await sleep(100) // past its deadline, on every clock
        // Sent as a call of its own (the first never answers, so the lane stops waiting for it).
        const patient = store.evaluate([{ key: 'patient', policies, cost: 1, deadline: performance.now() + 600_000 }])
        await resume()
        await assert.rejects(late, (error: unknown) => error instanceof FloodgateError && error.code === 'STORE_TIMEOUT')
        const [answer] = await patient
        assert.equal(answer.results[0].remaining, LIMIT - 1)
        assert.equal(await charged('late'), 0)
        assert.equal(await charged('patient'), 1)
      } finally {
        await resume().catch(() => {})
        await store.close()
      }
    })

    for (const mode of ['open', 'local'] as const) {
      test(`callers answered by the '${mode}' fallback while it hung are not charged in Redis when it resumes`, async () => {
        const store = new RedisStore({ url: redis.server.url })
        const limiter = new RateLimiter({ store, policies: policyOptions, timeout: '1s', onStoreError: mode, breaker: { failures: 1000 } })
        try {
          // The one charge before the hang, by the store itself: a first call (which connects and
          // loads the script) may outlast the limiter's timeout on a busy machine.
          await store.evaluate([{ key: 'k', policies, cost: 1 }])
          await hang()
          const decisions = await Promise.all(Array.from({ length: 10 }, () => limiter.limit('k')))
          assert.ok(decisions.every((decision) => decision.source === `fallback-${mode}`))
          await resume()
          // A peek through the same connection runs after every call queued before it.
          const [peek] = await store.evaluate([{ key: 'k', policies, cost: 0 }])
          assert.equal(peek.results[0].remaining, LIMIT - 1, 'only the call before the hang was charged')
          assert.equal(await charged('k'), 1)
        } finally {
          await resume().catch(() => {})
          await limiter.close()
          await store.close()
        }
      })
    }

    // Before its first reply the store does not know the server's clock, so it cannot give a call
    // a deadline on it: the store learns the clock first, and drops what expired while it waited.
    test("callers denied by the 'closed' fallback before the store's first reply are not charged when it resumes", async () => {
      const store = new RedisStore({ url: redis.server.url })
      const limiter = closedLimiter(store)
      try {
        while (!store.connected) await sleep(5)
        await hang()
        const decisions = await Promise.all(Array.from({ length: 5 }, () => limiter.limit('k')))
        assert.ok(decisions.every((decision) => decision.source === 'fallback-closed' && !decision.allowed))
        await resume()
        const [peek] = await store.evaluate([{ key: 'k', policies, cost: 0 }])
        assert.equal(peek.results[0].remaining, LIMIT, 'nothing was charged')
        assert.equal(await charged('k'), 0)
      } finally {
        await resume().catch(() => {})
        await limiter.close()
        await store.close()
      }
    })
  })
}

describe('a server stopped (SIGSTOP) while the store makes its first connection', () => {
  // The connection's socket opens (the kernel accepts it) but its handshake waits: the store holds
  // its calls until the connection is ready, and must not send then those its callers gave up on.
  test("callers denied by the 'closed' fallback meanwhile are not charged once it connects; later ones are", async () => {
    await redis.server.pause()
    const store = new RedisStore({ url: redis.server.url })
    const limiter = closedLimiter(store)
    try {
      const decisions = await Promise.all(Array.from({ length: 5 }, () => limiter.limit('k')))
      assert.ok(decisions.every((decision) => decision.source === 'fallback-closed' && !decision.allowed))
      assert.equal(store.connected, false)
      redis.server.resume()
      // Queued behind the held calls: answered once they have been dropped (or, wrongly, charged).
      const [peek] = await store.evaluate([{ key: 'k', policies, cost: 0 }])
      assert.equal(peek.results[0].remaining, LIMIT, 'nothing was charged')
      assert.equal(await charged('k'), 0)
      // Until the store decides (a call that outlasts the 200 ms timeout on a busy machine is denied
      // by the fallback, and must not be charged either).
      let after = await limiter.limit('k')
      for (let i = 0; i < 100 && after.source !== 'store'; i++) after = await limiter.limit('k')
      assert.deepEqual([after.source, after.remaining], ['store', LIMIT - 1])
      assert.equal(await charged('k'), 1)
    } finally {
      redis.server.resume()
      await limiter.close()
      await store.close()
    }
  })
})

describe('a Cluster master hung by CLIENT PAUSE', () => {
  test('callers answered by the fallback meanwhile are not charged on it when it resumes; other masters decide as usual', async () => {
    const cluster = await startCluster({ masters: 3, replicasPerMaster: 0, nodeTimeoutMs: 5000 })
    const store = new RedisStore({ cluster: [...cluster.startupNodes] })
    const limiter = new RateLimiter({ store, policies: policyOptions, timeout: '1s', onStoreError: 'open', breaker: { failures: 1000 } })
    const port = await cluster.masterOf('{k}')
    const node = new Redis(port, '127.0.0.1')
    try {
      // Keys on every master, so each lane has learnt its server's clock; charged by the store
      // itself, as first calls (connecting to every master) may outlast the limiter's timeout.
      const keys = Array.from({ length: 12 }, (_, i) => `other:${i}`)
      await Promise.all(['k', ...keys].map((key) => store.evaluate([{ key, policies, cost: 1 }])))
      await node.call('CLIENT', 'PAUSE', '600000', 'WRITE')
      const hung = await Promise.all(Array.from({ length: 10 }, () => limiter.limit('k')))
      assert.ok(hung.every((decision) => decision.source === 'fallback-open'))
      await node.call('CLIENT', 'UNPAUSE')
      const [peek] = await store.evaluate([{ key: 'k', policies, cost: 0 }])
      assert.equal(peek.results[0].remaining, LIMIT - 1, 'only the call before the pause was charged')
      const others = await Promise.all(keys.map((key) => store.evaluate([{ key, policies, cost: 0 }])))
      assert.ok(others.every(([response]) => response.results[0].remaining === LIMIT - 1))
    } finally {
      await node.call('CLIENT', 'UNPAUSE').catch(() => {})
      node.disconnect()
      await limiter.close()
      await store.close()
      await cluster.stop()
    }
  })
})
