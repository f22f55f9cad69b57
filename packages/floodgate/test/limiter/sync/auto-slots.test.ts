// sync: 'auto' and the lease engine's holdings: a key's heat found through its holding (one lookup a
// decision) is never another key's, and a key turning hot leases at once, sized to its heat.

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { createPolicy } from '../../../src/core/policy.js'
import { AutoSync } from '../../../src/limiter/sync/auto-sync.js'
import { LeaseSync } from '../../../src/limiter/sync/lease-sync.js'
import { MemoryStore } from '../../../src/stores/memory/memory-store.js'

const START = 1_700_000_000_000
const settle = () => new Promise<void>((resolve) => setImmediate(resolve))

describe("sync: 'auto' heat beside the lease engine's holdings", () => {
  it('a key whose slot was taken over reads its own heat, not the new owner’s', async () => {
    let now = START
    const clock = () => now
    const store = new MemoryStore({ clock })
    // Hot at 50 a second, read over 1 s; four keys followed at most.
    const policies = [createPolicy({ algorithm: 'fixed-window', limit: 1_000_000, period: '1h', sync: 'auto', hotRate: 50 })]
    const leases = new LeaseSync({ store, clock })
    const auto = new AutoSync({ store, leases, clock, maxKeys: 4 })
    const decide = async (key: string, times: number, gapMs: number) => {
      for (let i = 0; i < times; i++) {
        now += gapMs
        auto.decide(key, policies, 1, () => {})
        await settle()
      }
    }
    // `a` hot (200 a second), so its holding remembers its slot; then quiet for 5 s, so that its slot
    // may be taken over.
    await decide('a', 100, 5)
    assert.equal(auto.isHot('a', policies), true)
    now += 5000
    // Three more keys fill the table; a fifth takes `a`'s slot (the oldest, now below the keep rate)
    // and goes hot in it.
    for (const key of ['b', 'c', 'd']) await decide(key, 1, 1)
    await decide('e', 100, 5)
    assert.equal(auto.isHot('e', policies), true)
    assert.equal(auto.heatTotals().hot, 1)
    // `a` is asked again: its holding still names the slot `e` holds now. It is a new, cold key.
    await decide('a', 1, 5)
    assert.equal(auto.isHot('a', policies), false)
    assert.equal(auto.plainExact('a', policies), true)
    assert.equal(auto.isHot('e', policies), true)
    await leases.close()
  })

  it('a key turning hot takes a lease sized to its heat with the decision that turned it', async () => {
    let now = START
    const clock = () => now
    const store = new MemoryStore({ clock })
    const policies = [createPolicy({ algorithm: 'fixed-window', limit: 1_000_000, period: '1h', sync: 'auto', hotRate: 50 })]
    const leases = new LeaseSync({ store, clock })
    const auto = new AutoSync({ store, leases, clock })
    const sources: string[] = []
    // 100 decisions a second, twice the threshold, until the key is hot.
    while (!auto.isHot('k', policies)) {
      now += 10
      auto.decide('k', policies, 1, (_, __, source) => sources.push(source!))
      await settle()
    }
    // Exact until then; the decision that turned it took a lease and was answered from it. The lease
    // engine had counted none of its decisions: sized from the heat (~50 to 100 a second read over
    // 1 s, a quarter more), the lease covers at least the next half second.
    assert.ok(sources.slice(0, -1).every((source) => source === 'store'))
    assert.equal(sources.at(-1), 'lease')
    assert.ok(leases.held('k', policies) >= 50, `held ${leases.held('k', policies)}`)
    for (let i = 0; i < 50; i++) {
      now += 10
      auto.decide('k', policies, 1, (_, __, source) => sources.push(source!))
      await settle()
    }
    assert.deepEqual(sources.slice(-50), new Array(50).fill('lease'))
    await leases.close()
  })
})
