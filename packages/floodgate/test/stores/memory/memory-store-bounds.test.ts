// MemoryStore bounds: the key bound, eviction that never resets a limited key, and maxBytes.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { MemoryStore } from '../../../src/stores/memory/memory-store.js'
import { createPolicies, createPolicy } from '../../../src/core/policy.js'
import { T0, charge, fixed } from './store-support.js'

describe('MemoryStore bounds', () => {
  it('stays within maxKeys under a flood of unique keys, evicting the least recently used', async () => {
    const maxKeys = 1_000
    const store = new MemoryStore({ maxKeys })
    const policies = [fixed(5, '1h')]
    await charge(store, 'vip', policies, 1, T0)
    for (let i = 0; i < 10 * maxKeys; i++) {
      await charge(store, `flood:${i}`, policies, 1, T0)
      // Touching vip keeps it the most recently used one.
      if (i % 100 === 0) await charge(store, 'vip', policies, 0, T0)
      assert.ok(store.size <= maxKeys)
    }
    assert.equal(store.size, maxKeys)
    // vip kept its count (1 used); the first flood key was evicted and starts fresh.
    assert.equal((await charge(store, 'vip', policies, 0, T0)).results[0].remaining, 4)
    await charge(store, 'flood:0', policies, 4, T0)
    assert.equal((await charge(store, 'flood:0', policies, 0, T0)).results[0].remaining, 1)
  })

  it('keeps a dead key until its room is needed, then drops it before a live one, without a timer', async () => {
    const store = new MemoryStore({ maxKeys: 60 })
    const second = [fixed(5, '1s')]
    const hour = [fixed(5, '1h')]
    for (let i = 0; i < 50; i++) await charge(store, `old:${i}`, second, 1, T0)
    for (let i = 0; i < 10; i++) await charge(store, `live:${i}`, hour, 1, T0)
    // A second later every old key is dead but still held: one that comes back is updated in place.
    await charge(store, 'old:0', second, 1, T0 + 1_000)
    assert.equal(store.size, 60)
    // At the bound each new key drops one dead key (the oldest), never a live one.
    for (let i = 0; i < 49; i++) await charge(store, `new:${i}`, second, 1, T0 + 1_000)
    assert.equal(store.size, 60)
    for (let i = 0; i < 10; i++) assert.equal((await charge(store, `live:${i}`, hour, 0, T0 + 1_000)).results[0].remaining, 4)
    assert.equal((await charge(store, 'old:0', second, 0, T0 + 1_000)).results[0].remaining, 4)
    assert.equal((await charge(store, 'old:1', second, 0, T0 + 1_000)).results[0].remaining, 5)
  })

  it("a new key that takes over a dead key's room shares nothing with it and counts the same bytes", async () => {
    const store = new MemoryStore({ maxKeys: 1 })
    const fresh = new MemoryStore({ maxKeys: 1 })
    const log = [createPolicy({ algorithm: 'sliding-log', limit: 5, period: '1s' })]
    for (let i = 0; i < 4; i++) await charge(store, 'old', log, 1, T0)
    // 'old' is dead a second later; 'new' drops it for its room, then 'old' comes back fresh.
    const first = await charge(store, 'new', log, 1, T0 + 1_000)
    assert.equal(store.size, 1)
    await charge(fresh, 'new', log, 1, T0 + 1_000)
    assert.equal(store.sizeBytes, fresh.sizeBytes)
    const back = await charge(store, 'old', log, 1, T0 + 1_000)
    assert.deepEqual([first.results[0].remaining, back.results[0].remaining], [4, 4])
  })

  it('sheds dead protected keys the same way', async () => {
    const store = new MemoryStore({ maxKeys: 20 })
    const policies = [fixed(1, '1s')]
    for (let i = 0; i < 20; i++) await charge(store, `limited:${i}`, policies, 1, T0)
    assert.equal(store.protectedSize, 20)
    for (let i = 0; i < 20; i++) await charge(store, `new:${i}`, [fixed(5, '1h')], 1, T0 + 1_000)
    assert.equal(store.protectedSize, 0)
    assert.equal(store.size, 20)
  })
})

describe('MemoryStore eviction never resets a limited key', () => {
  const daily = createPolicies([{ name: 'daily', algorithm: 'fixed-window', limit: 3, period: '1d' }])

  it('keeps a denied key through a flood of unique keys ten times the store', async () => {
    const maxKeys = 500
    const store = new MemoryStore({ maxKeys })
    for (let i = 0; i < 3; i++) assert.equal((await charge(store, 'victim', daily, 1, T0)).allowed, true)
    assert.equal((await charge(store, 'victim', daily, 1, T0)).allowed, false)
    for (let i = 0; i < 10 * maxKeys; i++) {
      await charge(store, `flood:${i}`, daily, 1, T0 + 1)
      assert.ok(store.size <= maxKeys)
    }
    assert.equal(store.size, maxKeys)
    const after = await charge(store, 'victim', daily, 1, T0 + 2)
    assert.equal(after.allowed, false, 'the flood must not hand the victim a fresh limit')
    assert.equal(after.results[0].remaining, 0)
  })

  it('keeps a key past half its capacity, while a key with room left is the one forgiven', async () => {
    const maxKeys = 100
    const store = new MemoryStore({ maxKeys })
    await charge(store, 'near', daily, 2, T0)
    await charge(store, 'roomy', daily, 1, T0)
    assert.equal(store.protectedSize, 1)
    for (let i = 0; i < 5 * maxKeys; i++) await charge(store, `flood:${i}`, daily, 1, T0)
    assert.equal((await charge(store, 'near', daily, 0, T0)).results[0].remaining, 1)
    // The roomy key used a third of its limit: forgetting it gives back less than half a limit.
    assert.equal((await charge(store, 'roomy', daily, 0, T0)).results[0].remaining, 3)
  })

  it('leaves the protected class once its limit is restored, and drops dead protected keys first', async () => {
    const store = new MemoryStore({ maxKeys: 3 })
    const minute = createPolicies([{ name: 'minute', algorithm: 'fixed-window', limit: 1, period: '1m' }])
    await charge(store, 'a', minute, 1, T0)
    assert.equal(store.protectedSize, 1)
    await charge(store, 'b', daily, 1, T0)
    await charge(store, 'c', daily, 1, T0)
    // A minute later `a` holds nothing: the next key evicts it, not the live open keys.
    await charge(store, 'd', daily, 1, T0 + 60_000)
    assert.equal(store.size, 3)
    assert.equal(store.protectedSize, 0)
    assert.equal((await charge(store, 'b', daily, 0, T0 + 60_000)).results[0].remaining, 2)
    // A refund takes a key back out of the protected class.
    await charge(store, 'b', daily, 2, T0 + 60_000)
    assert.equal(store.protectedSize, 1)
    await charge(store, 'b', daily, -2, T0 + 60_000)
    assert.equal(store.protectedSize, 0)
  })

  it('when protected keys alone fill the store, forgives the least recently used of them and stays within maxKeys', async () => {
    const maxKeys = 10
    const store = new MemoryStore({ maxKeys })
    for (let i = 0; i <= maxKeys; i++) {
      for (let hit = 0; hit < 4; hit++) await charge(store, `limited:${i}`, daily, 1, T0)
      assert.ok(store.size <= maxKeys)
    }
    assert.equal(store.size, maxKeys)
    assert.equal(store.protectedSize, maxKeys)
    assert.equal((await charge(store, 'limited:0', daily, 0, T0)).results[0].remaining, 3, 'the oldest protected key was the one dropped')
    assert.equal((await charge(store, `limited:${maxKeys}`, daily, 0, T0)).results[0].remaining, 0, 'the newest limited key is counted')
  })
})

describe('MemoryStore maxBytes', () => {
  it('bounds the bytes held when keys are long, counting key length and state size', async () => {
    const maxBytes = 1_000_000
    const store = new MemoryStore({ maxBytes })
    const policies = [fixed(5, '1h')]
    const long = 'x'.repeat(60_000)
    for (let i = 0; i < 200; i++) {
      await charge(store, `${long}${i}`, policies, 1, T0)
      assert.ok(store.sizeBytes <= maxBytes, `${store.sizeBytes} > ${maxBytes}`)
    }
    // Each key counts at least 2 bytes per character: at most 8 of them fit.
    assert.ok(store.size <= 8 && store.size >= 7, `size ${store.size}`)
    // The newest keys are the ones kept.
    assert.equal((await charge(store, `${long}199`, policies, 0, T0)).results[0].remaining, 4)
  })

  it('follows a state that grows and shrinks (a sliding log keeps one number per request)', async () => {
    const store = new MemoryStore()
    const log = createPolicies([{ name: 'log', algorithm: 'sliding-log', limit: 100, period: '1h' }])
    await charge(store, 'k', log, 1, T0)
    const one = store.sizeBytes
    for (let i = 0; i < 10; i++) await charge(store, 'k', log, 1, T0 + i)
    assert.ok(store.sizeBytes >= one + 10 * 8, `${store.sizeBytes} after ten more requests, ${one} after one`)
    await store.reset('k', log)
    assert.equal(store.sizeBytes, 0)
    assert.equal(store.size, 0)
  })

  it('evicts other keys when a state grows past maxBytes', async () => {
    const store = new MemoryStore({ maxBytes: 4_000 })
    const log = createPolicies([{ name: 'log', algorithm: 'sliding-log', limit: 1_000, period: '1h' }])
    for (let i = 0; i < 5; i++) await charge(store, `small:${i}`, log, 1, T0)
    const before = store.size
    for (let i = 0; i < 300; i++) await charge(store, 'growing', log, 1, T0 + i)
    assert.ok(store.sizeBytes <= 4_000)
    assert.ok(store.size < before + 1, `size ${store.size}`)
  })
})
