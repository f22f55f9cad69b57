// One memcached server of three killed under load: only its keys go to the failure mode, and the
// keys of the two healthy servers keep being decided by memcached (issue 26, item 2).

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { RateLimiter, type DecisionSource } from '../../../src/index.js'
import { MemcachedStore } from '../../../src/memcached.js'
import { startMemcached, type MemcachedProcess } from '../../support/memcached-server.js'

let servers: MemcachedProcess[]

before(async () => {
  servers = await Promise.all([startMemcached(), startMemcached(), startMemcached()])
})

after(async () => {
  await Promise.all(servers.map((server) => server.stop()))
})

/** Every decision of a run, by whether its key's server was the killed one. */
class Tally {
  readonly healthy = new Map<DecisionSource, number>()
  readonly dead = new Map<DecisionSource, number>()

  add(onDeadServer: boolean, source: DecisionSource): void {
    const counts = onDeadServer ? this.dead : this.healthy
    counts.set(source, (counts.get(source) ?? 0) + 1)
  }

  static share(counts: Map<DecisionSource, number>, source: DecisionSource): number {
    let total = 0
    for (const n of counts.values()) total += n
    return total === 0 ? 0 : (counts.get(source) ?? 0) / total
  }

  toString(): string {
    return `healthy ${JSON.stringify(Object.fromEntries(this.healthy))}, dead ${JSON.stringify(Object.fromEntries(this.dead))}`
  }
}

test('1 of 3 servers SIGKILLed under load: ≥ 99% of the healthy servers’ decisions come from memcached, throughout', async (t) => {
  const names = servers.map((server) => server.address)
  const store = new MemcachedStore({ servers: names, prefix: 'shards:' })
  // The breaker's clock stands still during the run (no probe reaches the dead server, so the run
  // depends on no cooldown racing the machine), and the timeout is far above any healthy answer:
  // a killed server refuses at once, so only the dead shard's calls fail.
  let now = Date.UTC(2026, 0, 1, 12)
  const limiter = new RateLimiter({
    store,
    policies: [{ name: 'big', algorithm: 'fixed-window', limit: 1_000_000, period: '1h' }],
    onStoreError: 'open',
    timeout: '30s',
    breaker: { failures: 5, cooldown: '1s' },
    denyCache: false,
    clock: () => now,
  })
  const victim = servers[1]
  const keys = Array.from({ length: 150 }, (_, i) => `user:${i}`)
  const onVictim = new Set(keys.filter((key) => store.shardOf!(key) === victim.address))
  assert.ok(onVictim.size > 10 && onVictim.size < 100, `the victim holds some keys (${onVictim.size} of 150)`)

  const opened: string[] = []
  const closed: string[] = []
  const unavailable: string[] = []
  const available: string[] = []
  limiter.on('breaker-open', (shard) => opened.push(shard))
  limiter.on('breaker-close', (shard) => closed.push(shard))
  store.on('unavailable', (_error, shard) => unavailable.push(shard))
  store.on('available', (shard) => available.push(shard))

  const tally = new Tally()
  // One wave: every key decided at once, as concurrent clients would; every decision counted.
  const wave = async (): Promise<void> => {
    const decisions = await Promise.all(keys.map((key) => limiter.limit(key)))
    for (const [i, decision] of decisions.entries()) tally.add(onVictim.has(keys[i]), decision.source)
  }

  try {
    for (let i = 0; i < 3; i++) await wave()
    assert.equal(Tally.share(tally.healthy, 'store'), 1, `before the kill: ${tally}`)

    await victim.kill()
    // Keep the load on until the victim's breaker has opened (a state, not a time), then as long again.
    let waves = 0
    while (!opened.includes(victim.address)) {
      await wave()
      waves++
      assert.ok(waves < 1_000, `the victim's breaker never opened: ${tally}`)
    }
    const opening = new Map(tally.dead)
    for (let i = 0; i < Math.max(10, waves); i++) await wave()

    t.diagnostic(
      `victim ${victim.address}, ${onVictim.size} of ${keys.length} keys on it; ${waves} waves until its breaker opened; ${tally}`,
    )
    const share = Tally.share(tally.healthy, 'store')
    assert.ok(share >= 0.99, `healthy servers' decisions from memcached: ${(share * 100).toFixed(2)}% (${tally})`)
    assert.equal(tally.healthy.get('fallback-open'), undefined, `not one healthy key fell back: ${tally}`)
    assert.deepEqual(opened, [victim.address], 'one breaker opened: the dead server’s')
    assert.deepEqual(unavailable, [victim.address], 'the store announced the dead server, once')
    // After its breaker opened, the victim's keys are answered by the failure mode without a call.
    assert.ok((tally.dead.get('fallback-open') ?? 0) > (opening.get('fallback-open') ?? 0))

    // Back: its breaker probes after the cooldown, and both the store and the limiter say so.
    await victim.restart()
    const back = once(limiter, 'breaker-close')
    const victimKey = [...onVictim][0]
    // Each try a cooldown later: a probe that still met the old socket opens the breaker again.
    for (let i = 0; i < 50 && closed.length === 0; i++) {
      now += 1_000
      await limiter.limit(victimKey)
    }
    assert.deepEqual(await back, [victim.address])
    assert.deepEqual(available, [victim.address])
    assert.equal((await limiter.limit(victimKey)).source, 'store')
  } finally {
    await store.close()
  }
})
