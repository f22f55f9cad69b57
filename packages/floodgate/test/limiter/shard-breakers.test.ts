// A breaker per store shard: one failing shard's keys go to the failure mode, the others' to the
// store; breakers are bounded in number, and a shard that left is forgotten and announced closed.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { RateLimiter, type DecisionSource } from '../../src/index.js'
import { ShardBreakers } from '../../src/limiter/shard-breakers.js'
import type { EvaluateRequest, EvaluateResponse } from '../../src/stores/store.js'
import { Clock, FaultyStore } from './fixtures.js'

/** A FaultyStore split into shards by the key's first letter; keys of a `dead` shard fail at once. */
class ShardedStore extends FaultyStore {
  readonly dead = new Set<string>()
  present = ['a', 'b', 'c']
  private recoveredListener: ((shard: string) => void) | undefined
  readonly recovering: string[] = []

  shardOf(key: string): string {
    return key[0]
  }

  shards(): readonly string[] {
    return this.present
  }

  onRecovered(listener: (shard: string) => void): () => void {
    this.recoveredListener = listener
    return () => (this.recoveredListener = undefined)
  }

  recover(shard: string): void {
    this.recovering.push(shard)
  }

  announce(shard: string): void {
    this.recoveredListener?.(shard)
  }

  override evaluate(batch: readonly EvaluateRequest[]): Promise<EvaluateResponse[]> {
    if (batch.some((request) => this.dead.has(request.key[0]))) return Promise.reject(new Error('connection refused'))
    return super.evaluate(batch)
  }
}

function limiterOn(store: ShardedStore, clock: Clock): RateLimiter {
  return new RateLimiter({
    store,
    policies: [{ algorithm: 'fixed-window', limit: 1_000, period: '1h' }],
    breaker: { failures: 3, cooldown: '1s' },
    denyCache: false,
    clock: clock.read,
    timers: clock.timers,
  })
}

describe('a breaker per shard', () => {
  it("a dead shard's breaker opens alone: the other shards' keys are still decided by the store", async () => {
    const clock = new Clock()
    const store = new ShardedStore(clock)
    const limiter = limiterOn(store, clock)
    const events: string[] = []
    limiter.on('breaker-open', (shard) => events.push(`open ${shard}`))
    limiter.on('breaker-close', (shard) => events.push(`close ${shard}`))
    store.dead.add('b')
    const sources = new Map<string, DecisionSource[]>()
    for (let round = 0; round < 10; round++) {
      for (const key of ['a1', 'b1', 'c1']) {
        const { source } = await limiter.limit(key)
        sources.set(key[0], [...(sources.get(key[0]) ?? []), source])
      }
    }
    assert.deepEqual(new Set(sources.get('a')), new Set(['store']))
    assert.deepEqual(new Set(sources.get('c')), new Set(['store']))
    assert.ok(sources.get('b')!.every((source) => source === 'fallback-open'))
    assert.deepEqual(events, ['open b'])
    // The store is told which shard to recover; with the breaker open, b's keys cost no call.
    assert.ok(store.recovering.length > 0 && store.recovering.every((shard) => shard === 'b'))
    const calls = store.calls
    await limiter.limit('b2')
    assert.equal(store.calls, calls)

    // b answers again: the store says so, and the next call of b probes and closes its breaker.
    store.dead.delete('b')
    store.announce('b')
    assert.equal((await limiter.limit('b3')).source, 'store')
    assert.deepEqual(events, ['open b', 'close b'])
    await limiter.close()
    await store.close()
  })

  it('a shard that left the store (a failed-over master) is forgotten, and announced closed', async () => {
    const clock = new Clock()
    const store = new ShardedStore(clock)
    const limiter = limiterOn(store, clock)
    const events: string[] = []
    limiter.on('breaker-open', (shard) => events.push(`open ${shard}`))
    limiter.on('breaker-close', (shard) => events.push(`close ${shard}`))
    store.dead.add('b')
    for (let i = 0; i < 3; i++) await limiter.limit('b1')
    assert.deepEqual(events, ['open b'])
    store.present = ['a', 'c', 'd']
    store.announce('d')
    assert.deepEqual(events, ['open b', 'close b'])
    await limiter.close()
    await store.close()
  })

  it('holds at most its bound of breakers; past it, a new shard takes an idle one’s place or shares the whole store’s', () => {
    const breakers = new ShardBreakers(2, 1_000, 4)
    // A hundred shards through four places: each new one takes an idle one's place.
    for (let i = 0; i < 100; i++) assert.notEqual(breakers.of(`s${i}`), breakers.whole)
    const failing = ['f0', 'f1', 'f2', 'f3'].map((shard) => breakers.of(shard))
    for (const breaker of failing) breaker.recordFailure(0)
    // Every place holds a failing breaker: a new shard shares the whole store's, not a new one.
    const overflow = breakers.of('new')
    assert.equal(overflow, breakers.whole)
    assert.equal(breakers.nameOf('new', overflow), '')
    assert.equal(breakers.of('f0'), failing[0], 'failing breakers are kept')
  })
  it("fail-closed tells a key to wait for its own shard's probe, not another shard's", async () => {
    const clock = new Clock()
    const store = new ShardedStore(clock)
    const limiter = new RateLimiter({
      store,
      policies: [{ algorithm: 'fixed-window', limit: 1_000, period: '1h' }],
      breaker: { failures: 1, cooldown: '10s' },
      onStoreError: 'closed',
      denyCache: false,
      clock: clock.read,
      timers: clock.timers,
    })
    store.dead.add('a')
    store.dead.add('b')
    assert.equal((await limiter.limit('a1')).source, 'fallback-closed')
    clock.advance(6_000)
    // b's breaker opens 6 s after a's: its probe is 10 s away, a's only 4 s.
    const b = await limiter.limit('b1')
    assert.equal(b.source, 'fallback-closed')
    assert.equal(b.retryAfterMs, 10_000)
    const a = await limiter.limit('a1')
    assert.equal(a.retryAfterMs, 4_000)
  })
})
