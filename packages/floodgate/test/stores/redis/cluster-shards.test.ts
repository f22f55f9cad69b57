// One Redis Cluster master of three SIGKILLed under load: only the keys of its slots go to the
// failure mode until its replica takes over, and the keys of the two healthy masters keep being
// decided by Redis throughout (issue 26, item 2).

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { Redis } from 'ioredis'
import { RateLimiter, type DecisionSource } from '../../../src/index.js'
import { RedisStore } from '../../../src/redis.js'
import { keySlot } from '../../../src/stores/redis/slot.js'
import { startCluster, type RedisClusterHandle } from '../../support/redis-cluster.js'

/** The port of each slot's master, read once from a node (CLUSTER SLOTS). */
async function slotOwners(port: number): Promise<Map<number, number>> {
  const redis = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 0 })
  try {
    await redis.connect()
    const ranges = (await redis.call('CLUSTER', 'SLOTS')) as [number, number, [string, number]][]
    const owners = new Map<number, number>()
    for (const [start, end, [, owner]] of ranges) for (let slot = start; slot <= end; slot++) owners.set(slot, Number(owner))
    return owners
  } finally {
    redis.disconnect()
  }
}

function share(counts: Map<DecisionSource, number>, source: DecisionSource): number {
  let total = 0
  for (const n of counts.values()) total += n
  return total === 0 ? 0 : (counts.get(source) ?? 0) / total
}

const show = (counts: Map<DecisionSource, number>): string => JSON.stringify(Object.fromEntries(counts))

for (const requireFullCoverage of [false, true]) {
  describe(`a Redis Cluster (cluster-require-full-coverage ${requireFullCoverage ? 'yes' : 'no'})`, () => {
    let cluster: RedisClusterHandle

    before(async () => {
      cluster = await startCluster({ masters: 3, replicasPerMaster: 1, nodeTimeoutMs: 1000, requireFullCoverage })
    })

    after(async () => {
      await cluster?.stop()
    })

    test('a master SIGKILLed under load: ≥ 99% of the healthy masters’ decisions come from Redis, throughout', async (t) => {
      const store = new RedisStore({ cluster: [...cluster.startupNodes], prefix: 'shards:' })
      const limiter = new RateLimiter({
        store,
        policies: [{ algorithm: 'gcra', limit: 1_000_000, period: '1h' }],
        onStoreError: 'open',
        // Far above a healthy answer on a busy machine; a dead master's calls fail or wait it out.
        timeout: '5s',
        breaker: { failures: 5, cooldown: '200ms' },
        denyCache: false,
      })
      const keys = Array.from({ length: 120 }, (_, i) => `user:${i}`)
      const owners = await slotOwners(cluster.nodes[0].port)
      // The hash tag the store puts every record of a key under (keys.ts): `{user:i}`.
      const ownerOf = (key: string): number => owners.get(keySlot(`{${key}}`))!
      const victimPort = ownerOf(keys[0])
      const victim = `127.0.0.1:${victimPort}`
      const onVictim = new Set(keys.filter((key) => ownerOf(key) === victimPort))
      assert.ok(onVictim.size > 10 && onVictim.size < 100, `the victim holds some keys (${onVictim.size})`)

      const opened: string[] = []
      const closed: string[] = []
      const unavailable: string[] = []
      const available: string[] = []
      limiter.on('breaker-open', (shard) => opened.push(shard))
      limiter.on('breaker-close', (shard) => closed.push(shard))
      store.on('unavailable', (_error, shard) => unavailable.push(shard))
      store.on('available', (shard) => available.push(shard))

      const healthy = new Map<DecisionSource, number>()
      const dead = new Map<DecisionSource, number>()
      let counting = false
      // One wave: every key at once; once the kill is under way, every decision is counted.
      const wave = async (): Promise<Map<DecisionSource, number>> => {
        const decisions = await Promise.all(keys.map((key) => limiter.limit(key)))
        const victimSources = new Map<DecisionSource, number>()
        for (const [i, decision] of decisions.entries()) {
          const mine = onVictim.has(keys[i])
          if (mine) victimSources.set(decision.source, (victimSources.get(decision.source) ?? 0) + 1)
          if (!counting) continue
          const counts = mine ? dead : healthy
          counts.set(decision.source, (counts.get(decision.source) ?? 0) + 1)
        }
        return victimSources
      }

      try {
        // Up: the first waves connect to every master (on a busy machine, maybe past the timeout once).
        for (let i = 0; i < 200; i++) {
          const before = await wave()
          if (before.size === 1 && before.has('store') && !opened.length) break
          await new Promise((resolve) => setImmediate(resolve))
        }
        const warm = await Promise.all(keys.map((key) => limiter.limit(key)))
        assert.ok(
          warm.every((d) => d.source === 'store'),
          'before the kill every decision comes from Redis',
        )
        opened.length = 0

        counting = true
        await cluster.killMaster(keys[0])
        let healed = false
        const healing = cluster.waitUntilHealthy(30_000).then(() => (healed = true))
        // Load until the victim's breaker opened, the cluster healed, a wave of the victim's keys
        // was decided by Redis again and the store said so (states, not times); then ten waves more.
        let waves = 0
        for (;;) {
          const victimSources = await wave()
          waves++
          const back = victimSources.size === 1 && victimSources.has('store')
          // The store announces the victim's keys available when it reads the new slot map, which
          // may come after the promoted replica has already answered them: wait for that too.
          if (opened.includes(victim) && healed && back && available.includes(victim)) break
          assert.ok(waves < 5_000, `no recovery: healthy ${show(healthy)}, dead ${show(dead)}, opened ${opened}`)
        }
        await healing
        for (let i = 0; i < 10; i++) await wave()

        t.diagnostic(
          `victim ${victim} (${onVictim.size} of ${keys.length} keys); ${waves} waves to recovery; ` +
            `breakers opened ${JSON.stringify(opened)}, closed ${JSON.stringify(closed)}; healthy ${show(healthy)}; dead ${show(dead)}`,
        )
        const fromStore = share(healthy, 'store')
        assert.ok(fromStore >= 0.99, `healthy masters' decisions from Redis: ${(fromStore * 100).toFixed(2)}% (${show(healthy)})`)
        assert.ok((dead.get('fallback-open') ?? 0) > 0, 'the kill was felt by the victim’s keys')
        assert.ok(opened.includes(victim), 'the dead master’s breaker opened')
        assert.ok(unavailable.includes(victim), `the store announced the dead master (${unavailable})`)
        // Its keys are on the promoted replica now, so its breaker is forgotten, announced closed.
        assert.ok(closed.includes(victim), `the dead master's breaker was closed once its slots moved (${closed})`)
        assert.ok(available.includes(victim), `the store announced the dead master's keys available again (${available})`)
        assert.equal(store.shardOf(keys[0]) === victim, false, 'the victim key’s shard is the promoted replica')
      } finally {
        await store.close()
      }
    })
  })
}
