// Leases while the store fails, on a real redis-server: killed, stopped (SIGSTOP) and paused
// (CLIENT PAUSE) while a lease is held. Held units keep serving; nothing is returned twice or lost.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { Redis } from 'ioredis'
import { createPolicies } from '../../../src/core/policy.js'
import { RedisStore } from '../../../src/stores/redis/redis-store.js'
import { LeaseSync, type LeaseSource } from '../../../src/limiter/sync/lease-sync.js'
import { startRedis } from '../../support/redis-server.js'

const LIMIT = 1000
const policies = createPolicies([
  { name: 'fw', algorithm: 'fixed-window', limit: LIMIT, period: '1w', sync: 'lease', leaseMs: '10m', leaseMax: 50 },
])

interface Outcome {
  error?: unknown
  allowed?: boolean
  source?: LeaseSource
}

/** One decision; resolves with its outcome (a cancelled one never resolves, so it is not awaited). */
function decide(leases: LeaseSync, key: string): { outcome: Promise<Outcome>; cancel: () => void } {
  let cancel!: () => void
  const outcome = new Promise<Outcome>((resolve) => {
    cancel = leases.decide(key, policies, 1, (error, response, source) =>
      resolve(error === null ? { allowed: response!.allowed, source } : { error }),
    )
  })
  return { outcome, cancel }
}

/** Warms `key` up until this instance holds a lease of leaseMax units; returns the decisions made. */
async function warm(leases: LeaseSync, key: string): Promise<number> {
  // Demand first (lease sizes follow it), then one at a time until a fresh lease is held.
  await Promise.all(Array.from({ length: 100 }, () => decide(leases, key).outcome))
  let made = 100
  while (leases.held(key, policies) < 40) {
    await decide(leases, key).outcome
    made += 1
  }
  return made
}

async function remaining(store: RedisStore, key: string): Promise<number> {
  const [peek] = await store.lease([{ key, policies, id: 0, want: 0, need: 0, leaseMs: 0, returnId: 0, returnUnused: 0 }])
  return peek.results[0].remaining
}

/** Waits, without a clock, until `check` holds (each try a turn of the event loop apart, then 10 ms). */
async function until(check: () => boolean | Promise<boolean>): Promise<void> {
  for (let i = 0; !(await check()); i++) await new Promise((resolve) => setTimeout(resolve, i < 100 ? 0 : 10))
}

describe('leases while Redis fails', () => {
  it('killed: the held lease keeps serving until spent, then the failure reaches the caller; a new server starts fresh', async () => {
    const server = await startRedis()
    const store = new RedisStore({ url: server.url })
    const leases = new LeaseSync({ store })
    try {
      await warm(leases, 'k')
      const held = leases.held('k', policies)
      await server.stop()
      await until(() => !store.connected)
      const served = await Promise.all(Array.from({ length: held }, () => decide(leases, 'k').outcome))
      assert.deepEqual(served, Array(held).fill({ allowed: true, source: 'lease' }))
      const after = await decide(leases, 'k').outcome
      assert.equal((after.error as { code?: string }).code, 'STORE_UNAVAILABLE')
      await server.restart()
      await until(() => store.connected)
      assert.deepEqual(await decide(leases, 'k').outcome, { allowed: true, source: 'lease' })
    } finally {
      await leases.close()
      await store.close()
      await server.stop()
    }
  })

  it('stopped (SIGSTOP): held units serve; a late lease keeps what a caller gave up; none returned twice', async () => {
    const server = await startRedis()
    const store = new RedisStore({ url: server.url })
    const leases = new LeaseSync({ store })
    try {
      let admitted = await warm(leases, 'k')
      const held = leases.held('k', policies)
      await server.pause()
      const served = await Promise.all(Array.from({ length: held }, () => decide(leases, 'k').outcome))
      assert.ok(served.every((outcome) => outcome.allowed === true && outcome.source === 'lease'))
      admitted += held
      // The next decision needs the store, which hangs: its caller gives up (its timeout answered it).
      decide(leases, 'k').cancel()
      server.resume()
      // The late answer grants a lease whose units, the cancelled caller's included, stay usable.
      await until(() => leases.held('k', policies) > 0)
      const late = leases.held('k', policies)
      assert.ok(late >= 1)
      const one = await decide(leases, 'k').outcome
      assert.deepEqual(one, { allowed: true, source: 'lease' })
      admitted += 1
      await leases.close()
      // close() returned the unused units, once: the key has exactly what was not admitted.
      assert.equal(await remaining(store, 'k'), LIMIT - admitted)
    } finally {
      server.resume()
      await leases.close()
      await store.close()
      await server.stop()
    }
  })

  it('paused (CLIENT PAUSE WRITE): held units serve meanwhile, the store call waits and completes after', async () => {
    const server = await startRedis()
    const store = new RedisStore({ url: server.url })
    const leases = new LeaseSync({ store })
    const admin = new Redis(server.port, server.host)
    try {
      let admitted = await warm(leases, 'k')
      const held = leases.held('k', policies)
      await admin.call('CLIENT', 'PAUSE', '600000', 'WRITE')
      const served = await Promise.all(Array.from({ length: held }, () => decide(leases, 'k').outcome))
      assert.ok(served.every((outcome) => outcome.allowed === true && outcome.source === 'lease'))
      admitted += held
      const waiting = decide(leases, 'k').outcome
      await admin.call('CLIENT', 'UNPAUSE')
      assert.deepEqual(await waiting, { allowed: true, source: 'lease' })
      admitted += 1
      await leases.close()
      assert.equal(await remaining(store, 'k'), LIMIT - admitted)
    } finally {
      await admin.call('CLIENT', 'UNPAUSE').catch(() => {})
      admin.disconnect()
      await leases.close()
      await store.close()
      await server.stop()
    }
  })
})
