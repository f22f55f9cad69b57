// Shared token buckets on a store with the merge primitive (write-back's Store.merge): units heard
// from another region while the bucket is empty are owed, not dropped. Runs once that primitive is
// in the RedisStore (the h-writeback branch); skipped before.

import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { createPolicies } from '../../src/core/policy.js'
import { RedisStore } from '../../src/stores/redis/redis-store.js'
import { burst, startRegions, type TestRegions } from './support.js'

const HOUR = 3_600_000
let now = Math.floor(Date.now() / HOUR) * HOUR + 1_000
const hasMerge = typeof (RedisStore.prototype as { merge?: unknown }).merge === 'function'

const skip = hasMerge ? false : 'RedisStore has no merge primitive on this branch'

describe('shared token bucket on a store with Store.merge', { skip }, () => {
  let net: TestRegions

  before(async () => {
    net = await startRegions(['eu', 'us'], [{ name: 'unused', algorithm: 'fixed-window', limit: 1, period: '1h' }], () => now)
  })
  after(async () => net?.stop())

  it('a bucket owes what the other region used while it was empty', async () => {
    const [eu, us] = net.regions
    const policies = createPolicies([{ name: 'debt', algorithm: 'token-bucket', limit: 100, period: '1h', regions: 'shared' }])
    // Both regions spend the whole bucket before hearing of each other.
    assert.equal(await burst(eu, 'k', 100, policies), 100)
    assert.equal(await burst(us, 'k', 100, policies), 100)
    for (let i = 0; i < 3; i++) await net.tickAll()
    assert.equal(eu.sync.status().counters.unitsClaimed, 100)
    // Half an hour refills 50 units: without the debt of 100 heard units they would pass.
    now += HOUR / 2
    assert.equal(await burst(eu, 'k', 1, policies), 0)
  })
})
