// A region on a Redis Cluster (3 masters) beside a region on a standalone Redis: usage of many keys
// (so many slots) merges per slot on the Cluster, both regions converge, and a shared limit holds.

import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { Cluster, Redis } from 'ioredis'
import { createPolicies, type PolicyOptions } from '../../src/core/policy.js'
import { RateLimiter } from '../../src/limiter/rate-limiter.js'
import { RegionSync } from '../../src/regions/region-sync.js'
import { usageKey } from '../../src/regions/usage-script.js'
import { RedisStore } from '../../src/stores/redis/redis-store.js'
import { startCluster, type RedisClusterHandle } from '../support/redis-cluster.js'
import { startRedis, type RedisProcess } from '../support/redis-server.js'

const MANUAL = { setTimeout: () => 0, clearTimeout: () => undefined }
const HOUR = 3_600_000
let now = Math.floor(Date.now() / HOUR) * HOUR + 1_000
const options: PolicyOptions[] = [{ name: 'cluster-shared', algorithm: 'fixed-window', limit: 10, period: '1h', regions: 'shared' }]
const KEYS = Array.from({ length: 30 }, (_, i) => `tenant-${i}`)

describe('a region on a Redis Cluster', () => {
  let cluster: RedisClusterHandle
  let standalone: RedisProcess
  let euClient: Cluster
  let usClient: Redis
  let usToEu: Cluster
  let euStore: RedisStore
  let usStore: RedisStore
  let eu: RegionSync
  let us: RegionSync

  before(async () => {
    cluster = await startCluster({ masters: 3, replicasPerMaster: 0 })
    standalone = await startRedis()
    euClient = new Cluster([...cluster.startupNodes])
    usClient = new Redis(standalone.url)
    euStore = new RedisStore({ cluster: cluster.startupNodes })
    usStore = new RedisStore({ url: standalone.url })
    // us reaches eu's Cluster through a cluster client of its own.
    eu = new RegionSync({ region: 'eu', local: euStore, peers: { us: standalone.url }, clock: () => now, timers: MANUAL })
    usToEu = new Cluster([...cluster.startupNodes])
    us = new RegionSync({ region: 'us', local: usStore, peers: { eu: usToEu }, clock: () => now, timers: MANUAL })
  })
  after(async () => {
    await eu?.close()
    await us?.close()
    await euStore?.close()
    await usStore?.close()
    euClient?.disconnect()
    usToEu?.disconnect()
    usClient?.disconnect()
    await cluster?.stop()
    await standalone?.stop()
  })

  it('merges usage of keys in many slots, converges, and holds a shared limit', async () => {
    // Timers that never fire: on a loaded machine a Cluster answer can come late, and a timed-out call
    // would be admitted by the failure mode; this test is about the merge, so every call waits.
    const timers = { now: () => performance.now(), setTimeout: () => ({}) }
    const euLimiter = new RateLimiter({ store: eu.store, policies: options, clock: () => now, timeout: '5s', timers })
    const usLimiter = new RateLimiter({ store: us.store, policies: options, clock: () => now, timeout: '5s', timers })
    for (const key of KEYS) {
      for (let i = 0; i < 4; i++) assert.equal((await euLimiter.limit(key)).allowed, true)
      for (let i = 0; i < 3; i++) assert.equal((await usLimiter.limit(key)).allowed, true)
    }
    for (let i = 0; i < 3; i++) await Promise.all([eu.tick(), us.tick()])
    assert.equal(eu.status().counters.failedTicks, 0)
    const policy = createPolicies(options)[0]
    for (const key of KEYS) {
      const hash = usageKey('fg:', key, policy, Math.floor(now / HOUR))
      const [inEu, inUs] = await Promise.all([euClient.hgetall(hash), usClient.hgetall(hash)])
      assert.equal(inEu['u|eu'], '4', key)
      assert.equal(inEu['u|us'], '3', key)
      assert.equal(inUs['u|eu'], '4', key)
      assert.equal(inUs['u|us'], '3', key)
      // 7 of 10 used: eu may take 3 more, then both regions deny.
      for (let i = 0; i < 3; i++) assert.equal((await euLimiter.limit(key)).allowed, true)
      const denied = await euLimiter.limit(key)
      assert.equal(denied.allowed, false, `${key}: ${denied.source}`)
    }
    await Promise.all([eu.tick(), us.tick()])
    await Promise.all([eu.tick(), us.tick()])
    // us decided none of these keys since: its copies are older than two intervals, so it reads them again.
    now += 1_000
    for (const key of KEYS) assert.equal((await usLimiter.limit(key)).allowed, false, key)
    await euLimiter.close()
    await usLimiter.close()
  })
})
