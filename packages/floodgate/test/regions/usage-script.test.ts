// usage.lua against its TypeScript twin (crdt.ts) on a real redis-server: random merges, replayed and
// reordered, leave the same fields; claims hand out each peer's units once; a restarted process
// (a new RegionSync on the same store) keeps every count made before it.

import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import fc from 'fast-check'
import { Redis } from 'ioredis'
import { createPolicies, type PolicyOptions } from '../../src/core/policy.js'
import { fold, mergeInto, sharedFields, usedBy } from '../../src/regions/crdt.js'
import { RegionSync } from '../../src/regions/region-sync.js'
import { mergeUsage, usageKey } from '../../src/regions/usage-script.js'
import { RateLimiter } from '../../src/limiter/rate-limiter.js'
import { toConnection, type Connection } from '../../src/stores/redis/connection.js'
import { RedisStore } from '../../src/stores/redis/redis-store.js'
import { startRedis, type RedisProcess } from '../support/redis-server.js'

type Merge = {
  origin: string
  entries: [string, number][]
  fields: [string, number][]
  claim: boolean
}

const arbMerge: fc.Arbitrary<Merge> = fc.record({
  origin: fc.constantFrom('p1', 'p2', 'p3'),
  entries: fc.array(fc.tuple(fc.constantFrom('u', 'd', 'g|us', 'g|ap'), fc.nat(500)), { maxLength: 3 }),
  fields: fc.array(fc.tuple(fc.constantFrom('u|us', 'u|ap', 'd|us', 'g|us|eu', 'g|ap|us'), fc.nat(500)), { maxLength: 3 }),
  claim: fc.boolean(),
})

describe('usage.lua', () => {
  let redis: RedisProcess
  let client: Redis
  let connection: Connection

  before(async () => {
    redis = await startRedis()
    client = new Redis(redis.url)
    connection = toConnection(client)
  })
  after(async () => {
    client.disconnect()
    await redis.stop()
  })

  it('equals its TypeScript twin on random merges, each sent twice (a replay counts once)', async () => {
    let run = 0
    await fc.assert(
      fc.asyncProperty(fc.array(arbMerge, { maxLength: 12 }), async (merges) => {
        const key = `twin:${++run}`
        const model = new Map<string, number>()
        let claimed = 0
        const claims = new Map<string, number>()
        for (const merge of merges) {
          for (let copy = 0; copy < 2; copy++) {
            const fields = new Map(merge.fields)
            const args = { region: 'eu', origin: merge.origin, entries: merge.entries, fields, claim: merge.claim, ttlMs: 60_000 }
            const reply = await mergeUsage(connection, key, args)
            if (copy === 0) {
              // The model: process entries rolled up, shared fields merged by maximum, claims once per unit.
              for (const [sub, cumulative] of merge.entries) fold(model, 'eu', merge.origin, sub, cumulative)
              mergeInto(model, new Map(merge.fields))
              let expectedClaim = 0
              if (merge.claim) {
                for (const region of ['us', 'ap']) {
                  const used = usedBy(model, region)
                  const done = claims.get(region) ?? 0
                  if (used > done) {
                    expectedClaim += used - done
                    claims.set(region, used)
                  }
                }
              }
              assert.equal(reply.claimed, expectedClaim)
              claimed += reply.claimed
            } else {
              assert.equal(reply.claimed, 0, 'a replayed claim hands out nothing')
            }
            assert.deepEqual(new Map([...reply.fields].sort()), new Map([...sharedFields(model)].sort()))
          }
        }
        assert.ok(claimed >= 0)
      }),
      { numRuns: 60 },
    )
  })

  it('a restarted process keeps every count made before it, and adds its own', async () => {
    const store = new RedisStore({ url: redis.url })
    const manual = { setTimeout: () => 0, clearTimeout: () => undefined }
    const now = 1_700_000_000_000
    const options: PolicyOptions[] = [{ name: 'restart', algorithm: 'fixed-window', limit: 100, period: '1h', regions: 'shared' }]
    const policies = createPolicies(options)
    // A timeout no busy machine reaches: a decision the store answered late would go to the
    // failure mode uncounted, and the count would miss it.
    const limiterOptions = { policies: options, clock: () => now, timeout: '30s' } as const
    const first = new RegionSync({ region: 'eu', local: store, peers: {}, clock: () => now, timers: manual })
    const second = new RegionSync({ region: 'eu', local: store, peers: {}, clock: () => now, timers: manual })
    try {
      const limiterA = new RateLimiter({ store: first.store, ...limiterOptions })
      for (let i = 0; i < 7; i++) assert.equal((await limiterA.limit('k')).source, 'store')
      await first.tick()
      for (let i = 0; i < 3; i++) assert.equal((await limiterA.limit('k')).source, 'store')
      // close() merges what the last tick did not.
      await first.close()
      const limiterB = new RateLimiter({ store: second.store, ...limiterOptions })
      for (let i = 0; i < 5; i++) assert.equal((await limiterB.limit('k')).source, 'store')
      await second.tick()
      await second.tick()
      const hash = await client.hgetall(usageKey('fg:', 'k', policies[0], Math.floor(now / 3_600_000)))
      assert.equal(Number(hash['u|eu']), 15)
    } finally {
      // Closed whatever failed: an open store's client would keep the file running to its timeout.
      await first.close()
      await second.close()
      await store.close()
    }
  })
})
