// Lease calls are bounded like exact ones: they carry their decision's deadline, so a hung Redis
// (SIGSTOP) that resumes and runs the lease calls queued meanwhile grants and charges nothing for
// callers the fallback already answered; and giving every lease back (close, flush) waits for a hung
// Redis no longer than the limiter's timeout.

import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { createPolicies, type PolicyOptions } from '../../../src/core/policy.js'
import { RateLimiter, type Decision, type DecisionSource } from '../../../src/index.js'
import { RedisStore } from '../../../src/redis.js'
import { useRedis } from '../../support/redis-store.js'
import { Clock, nextTurn } from '../fixtures.js'

const LIMIT = 100

const redis = useRedis()

/**
 * Decides `key` until the decision comes from one of `sources`, for at most 20 s (a bound on a
 * hang, not a speed test): on a busy machine a first call, which connects and loads the script,
 * may outlast the 200 ms timeout and be answered by the fallback; the test needs the state (the
 * store answering), not that speed.
 */
async function fromStore(limiter: RateLimiter, key: string, sources: readonly DecisionSource[]): Promise<Decision> {
  const deadline = Date.now() + 20_000
  let decision = await limiter.limit(key)
  while (!sources.includes(decision.source) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 100))
    decision = await limiter.limit(key)
  }
  return decision
}

// A cold key's decisions (auto), and a fresh key's first one (lease: no demand yet, so decided
// exactly), are lease calls that charge the request in hand.
for (const sync of ['auto', 'lease'] as const) {
  describe(`sync: '${sync}' on a server hung by SIGSTOP`, () => {
    test('callers answered by the fallback while it hung are not charged when it resumes', async () => {
      const options: PolicyOptions = { name: 'day', algorithm: 'fixed-window', limit: LIMIT, period: '1d', sync }
      const policies = createPolicies([options])
      const store = new RedisStore({ url: redis.server.url })
      const limiter = new RateLimiter({ store, policies: [options], timeout: '200ms', onStoreError: 'open', breaker: { failures: 1000 } })
      const key = `hung-${sync}`
      try {
        // The store learns the server's clock from a first reply.
        assert.equal((await fromStore(limiter, `warm-${sync}`, ['store'])).source, 'store')
        await redis.server.pause()
        const decisions = await Promise.all(Array.from({ length: 10 }, () => limiter.limit(key)))
        assert.ok(
          decisions.every((decision) => decision.source === 'fallback-open'),
          decisions.map((d) => d.source).join(),
        )
        redis.server.resume()
        // Through the same connection, so it runs after every call queued before it.
        const [peek] = await store.lease([{ key, policies, id: 0, want: 0, need: 0, leaseMs: 0, returnId: 0, returnUnused: 0 }])
        assert.equal(peek.results[0].remaining, LIMIT, 'nothing was charged')
        // Once it answers again, the key is decided in the store as before.
        const later = await fromStore(limiter, key, ['store', 'lease'])
        assert.ok(later.allowed && (later.source === 'store' || later.source === 'lease'), later.source)
      } finally {
        redis.server.resume()
        await limiter.close()
        await store.close()
      }
    })
  })
}

test('a lease request past its deadline is not sent, and one that reaches Redis late is not applied', async () => {
  const policies = createPolicies([{ name: 'day', algorithm: 'fixed-window', limit: LIMIT, period: '1d', sync: 'lease' }])
  const store = new RedisStore({ url: redis.server.url })
  const ask = { policies, id: 0, want: 0, need: 1, leaseMs: 0, returnId: 0, returnUnused: 0 }
  try {
    const passed = store.lease([{ ...ask, key: 'passed', deadline: performance.now() - 1 }])
    await assert.rejects(passed, (error: { code?: string }) => error.code === 'STORE_TIMEOUT')
    await store.lease([{ ...ask, key: 'warm', need: 0 }])
    await redis.server.pause()
    const late = store.lease([{ ...ask, key: 'late', deadline: performance.now() + 20 }])
    late.catch(() => {})
    // Until the deadline has passed on every clock: the server's is at least as late as ours.
    const passedAt = performance.now() + 20
    while (performance.now() <= passedAt + 5) await new Promise((resolve) => setTimeout(resolve, 10))
    redis.server.resume()
    await assert.rejects(late, (error: { code?: string }) => error.code === 'STORE_TIMEOUT')
    const [peek] = await store.lease([{ ...ask, key: 'late', need: 0 }])
    assert.equal(peek.results[0].remaining, LIMIT)
  } finally {
    redis.server.resume()
    await store.close()
  }
})

test('close() gives every lease back within the timeout while Redis is stopped (injected timers)', async () => {
  const clock = new Clock()
  const options: PolicyOptions = { name: 'day', algorithm: 'fixed-window', limit: LIMIT, period: '1d', sync: 'lease', leaseMs: '1h' }
  const store = new RedisStore({ url: redis.server.url })
  const limiter = new RateLimiter({ store, policies: [options], timeout: '100ms', clock: clock.read, timers: clock.timers })
  try {
    // Demand, then a lease: its units are what close() gives back.
    for (let i = 0; i < 20 && limiter.syncState().leases!.leases === 0; i++) {
      await limiter.limit('k')
      clock.advance(10)
    }
    assert.equal(limiter.syncState().leases!.leases, 1)
    await redis.server.pause()
    const closing = limiter.close().then(() => 'closed')
    const turns = async (): Promise<string> => {
      for (let i = 0; i < 20; i++) await nextTurn()
      return 'waiting'
    }
    assert.equal(await Promise.race([closing, turns()]), 'waiting', 'the return waits for the store meanwhile')
    clock.advance(100)
    assert.equal(await Promise.race([closing, turns()]), 'closed')
  } finally {
    redis.server.resume()
    await limiter.close()
    await store.close()
  }
})
