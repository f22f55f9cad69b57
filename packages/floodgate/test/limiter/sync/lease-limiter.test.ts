// sync 'lease' and 'auto' through the RateLimiter: sources, the guarantee across limiters on one
// store, concurrency releases, resets, close() and a store without the lease primitive.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { RateLimiter } from '../../../src/limiter/rate-limiter.js'
import { MemoryStore } from '../../../src/stores/memory/memory-store.js'
import type { Store } from '../../../src/stores/store.js'
import type { PolicyOptions } from '../../../src/core/policy.js'
import { FloodgateError } from '../../../src/core/errors.js'
import { Clock } from '../fixtures.js'

describe('RateLimiter with sync: lease', () => {
  it('admits in-process from leases, says so in `source`, and four limiters on one store admit exactly the limit', async () => {
    const store = new MemoryStore()
    const limiters = Array.from(
      { length: 4 },
      () => new RateLimiter({ store, policies: [{ algorithm: 'fixed-window', limit: 500, period: '1w', sync: 'lease' }] }),
    )
    const sources = new Map<string, number>()
    let admitted = 0
    for (let round = 0; round < 10; round++) {
      const decisions = await Promise.all(limiters.flatMap((limiter) => Array.from({ length: 30 }, () => limiter.limit('k'))))
      for (const decision of decisions) {
        if (decision.allowed) admitted++
        sources.set(decision.source, (sources.get(decision.source) ?? 0) + 1)
      }
    }
    assert.equal(admitted, 500)
    // Nearly all in-process; a key's first decisions, before demand is known, are decided exactly.
    assert.ok((sources.get('lease') ?? 0) >= 450, `sources ${JSON.stringify([...sources])}`)
    // Denials come from a store call, then from the deny cache until the key could admit again.
    assert.ok([...sources.keys()].every((source) => source === 'lease' || source === 'store' || source === 'deny-cache'))
    await Promise.all(limiters.map((limiter) => limiter.close()))
  })

  it('close() gives the unused units back', async () => {
    const store = new MemoryStore()
    const limiter = new RateLimiter({
      store,
      policies: [{ algorithm: 'token-bucket', limit: 100, period: '1w', sync: 'lease', leaseMax: 20 }],
    })
    await Promise.all(Array.from({ length: 30 }, () => limiter.limit('k')))
    await limiter.close()
    const peek = new RateLimiter({ store, policies: [{ algorithm: 'token-bucket', limit: 100, period: '1w', sync: 'lease' }] })
    const decision = await peek.limit('k', { cost: 0 })
    assert.equal(decision.remaining, 70)
    await peek.close()
  })

  it('concurrency: a lease released in another instance frees no slot of someone else', async () => {
    // Three instances on one store (A, B, C). A's slot comes from a block that ends (in the store)
    // before the slot's own period would; B releases it after that, as a process that received the
    // lease over the wire would. Refunded in the store, that would remove C's live slot.
    const clock = new Clock()
    const store = new MemoryStore({ clock: clock.read })
    const policies: PolicyOptions[] = [{ name: 'c', algorithm: 'concurrency', limit: 4, period: '1s', sync: 'lease', leaseMax: 2 }]
    const [a, b, c] = Array.from({ length: 3 }, () => new RateLimiter({ store, policies, clock: clock.read, timers: clock.timers }))
    assert.equal((await a.limit('k')).source, 'store') // a first request: decided exactly
    clock.advance(1)
    const fromBlock = await a.limit('k') // the second takes a block of 2 (granted at 1, so it ends at 1001)
    assert.equal(fromBlock.allowed, true)
    clock.advance(499)
    const late = await a.limit('k') // the block's second slot, acquired at 500: its own period ends at 1500
    assert.equal(late.source, 'lease')
    clock.advance(100)
    assert.equal((await c.limit('k')).allowed, true) // C's slot, live until 1600
    clock.advance(600) // 1200: A's block has ended in the store; only C's slot is in flight there
    const wire = JSON.parse(JSON.stringify(late.lease)) as typeof late.lease
    await b.release(wire!)
    // C's slot is still counted (the block's slots, the late one too, ended with the block).
    assert.equal((await c.limit('k', { cost: 0 })).remaining, 3)
    const more = await Promise.all(Array.from({ length: 4 }, () => b.limit('k')))
    assert.equal(more.filter((decision) => decision.allowed).length, 3)
    await Promise.all([a, b, c].map((limiter) => limiter.close()))
  })

  it('concurrency: a released slot serves the lease again; releases of an earlier lease are not credited', async () => {
    const store = new MemoryStore()
    const limiter = new RateLimiter({ store, policies: [{ algorithm: 'concurrency', limit: 4, period: '1h', sync: 'lease' }] })
    const held = await Promise.all(Array.from({ length: 4 }, () => limiter.limit('k')))
    assert.ok(held.every((decision) => decision.allowed))
    assert.equal((await limiter.limit('k')).allowed, false, 'four in flight: the fifth waits')
    for (const decision of held) await limiter.release(decision.lease!)
    const again = await Promise.all(Array.from({ length: 4 }, () => limiter.limit('k')))
    const inFlight = again.filter((decision) => decision.allowed).length
    assert.ok(inFlight <= 4)
    await limiter.close()
  })

  it('reset() drops the held lease, so nothing leased before counts against the fresh key', async () => {
    const store = new MemoryStore()
    const limiter = new RateLimiter({ store, policies: [{ algorithm: 'fixed-window', limit: 10, period: '1w', sync: 'lease' }] })
    await Promise.all(Array.from({ length: 10 }, () => limiter.limit('k')))
    assert.equal((await limiter.limit('k')).allowed, false)
    await limiter.reset('k')
    const after = await Promise.all(Array.from({ length: 11 }, () => limiter.limit('k')))
    assert.equal(after.filter((decision) => decision.allowed).length, 10)
    await limiter.close()
  })

  it('refuses lease on a store without the lease primitive, naming the option', async () => {
    const memory = new MemoryStore()
    const bare: Store = {
      evaluate: (batch) => memory.evaluate(batch),
      reset: (key, policies) => memory.reset(key, policies),
      close: () => memory.close(),
    }
    const limiter = () => new RateLimiter({ store: bare, policies: [{ algorithm: 'gcra', limit: 10, period: '1s', sync: 'lease' }] })
    assert.throws(limiter, (error: unknown) => error instanceof FloodgateError && /Store\.lease/.test(error.message))
  })

  it('limitSync refuses a lease-synced set with the reason', () => {
    const limiter = new RateLimiter({ policies: [{ algorithm: 'gcra', limit: 10, period: '1s', sync: 'lease' }] })
    assert.throws(() => limiter.limitSync('k'), /sync: 'lease' asks the store when a lease runs short/)
  })
})

describe('RateLimiter with sync: auto', () => {
  it('decides a cold key in the store and moves a hot one to leases, within the limit', async () => {
    const store = new MemoryStore()
    const limiter = new RateLimiter({ store, policies: [{ algorithm: 'gcra', limit: 1000, period: '1w', sync: 'auto', hotRate: 50 }] })
    assert.equal((await limiter.limit('k')).source, 'store')
    const sources: string[] = []
    for (let i = 0; i < 40; i++) {
      const decisions = await Promise.all(Array.from({ length: 25 }, () => limiter.limit('k')))
      sources.push(...decisions.map((decision) => decision.source))
    }
    assert.ok(sources.includes('lease'), 'a key decided 1000 times at once runs hot')
    assert.equal((await limiter.limit('k', { cost: 0 })).allowed, true)
    await limiter.close()
    const peek = new RateLimiter({ store, policies: [{ algorithm: 'gcra', limit: 1000, period: '1w', sync: 'auto' }] })
    assert.equal((await peek.limit('k', { cost: 0 })).remaining, 0, '1001 decisions asked: exactly 1000 admitted, nothing left')
    await peek.close()
  })

  it("switches on the limiter's injected clock: hot above hotRate, cold again below half of it", async () => {
    const clock = new Clock()
    const store = new MemoryStore({ clock: clock.read })
    const policies = [{ algorithm: 'fixed-window' as const, limit: 100_000, period: '1w' as const, sync: 'auto' as const, hotRate: 100 }]
    const limiter = new RateLimiter({ store, policies, clock: clock.read, timers: clock.timers })
    const at = async (perSecond: number, count: number) => {
      const sources: string[] = []
      for (let i = 0; i < count; i++) {
        clock.advance(1000 / perSecond)
        sources.push((await limiter.limit('k')).source)
      }
      return sources
    }
    assert.ok(
      (await at(20, 50)).every((source) => source === 'store'),
      'cold at 20/s',
    )
    const warming = await at(400, 400)
    assert.ok(
      warming.slice(-100).every((source) => source === 'lease'),
      'hot at 400/s',
    )
    const cooling = await at(10, 100)
    assert.ok(
      cooling.slice(-20).every((source) => source === 'store'),
      'cold again at 10/s',
    )
    await limiter.close()
  })
})
