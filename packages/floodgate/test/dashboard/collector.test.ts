// The dashboard collector: per-second rates and totals on an injected clock, bounded rule rows,
// and a RateLimiter's events (decisions, fallbacks, the breaker, store latency) fed by `watch`.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { RateLimiter } from '../../src/index.js'
import { DashboardCollector, OTHER_RULE } from '../../src/dashboard.js'
import { Clock, FaultyStore, T0 } from '../limiter/fixtures.js'
import { MemoryStore } from '../../src/stores/memory/memory-store.js'

describe('DashboardCollector', () => {
  it('counts allowed and denied units per whole second and per rule, and keeps totals', () => {
    const clock = new Clock()
    const collector = new DashboardCollector({ clock: clock.read, historySeconds: 5 })
    collector.record('login', 'user:1', 3, 0)
    collector.record('login', 'user:2', 0, 2)
    clock.advance(1000)
    collector.record('search', 'user:1', 5, 1)
    clock.advance(1000)
    collector.record('search', 'user:1', 7, 0) // the second in progress: in the totals, not yet in the series
    const snapshot = collector.snapshot()
    const second = Math.floor(T0 / 1000)
    assert.deepEqual(snapshot.series.time, [second - 3, second - 2, second - 1, second, second + 1])
    assert.deepEqual(snapshot.series.allowed, [0, 0, 0, 3, 5])
    assert.deepEqual(snapshot.series.denied, [0, 0, 0, 2, 1])
    assert.deepEqual(snapshot.totals, { allowed: 15, denied: 3 })
    const search = snapshot.rules.find((rule) => rule.rule === 'search')!
    assert.deepEqual({ allowed: search.allowed, denied: search.denied }, { allowed: 12, denied: 1 })
    assert.deepEqual(search.series, { allowed: [0, 0, 0, 0, 5], denied: [0, 0, 0, 0, 1] })
    assert.equal(search.allowedPerSecond, 0.5)
    assert.deepEqual(
      snapshot.topKeys.keys.map((k) => k.denied),
      [2, 1],
    )
    // Keys are hashed unless the operator asks for raw ones: sha256("user:2") starts with 5dd7a3d3….
    assert.match(snapshot.topKeys.keys[0].key, /^sha256:[0-9a-f]{16}$/)
    assert.equal(snapshot.topKeys.hashed, true)
    assert.equal(snapshot.store.latency, null)
    assert.equal(snapshot.sync, null)
  })

  it('forgets seconds older than its history, however long it was idle', () => {
    const clock = new Clock()
    const collector = new DashboardCollector({ clock: clock.read, historySeconds: 3 })
    collector.record('r', 'k', 1, 0)
    clock.advance(1000)
    assert.deepEqual(collector.snapshot().series.allowed, [0, 0, 1])
    clock.advance(3000)
    assert.deepEqual(collector.snapshot().series.allowed, [0, 0, 0])
    clock.advance(7 * 1000 * 3) // the slot of the first second is reused by a later one
    collector.record('r', 'k', 4, 0)
    clock.advance(1000)
    assert.deepEqual(collector.snapshot().series.allowed, [0, 0, 4])
    assert.equal(collector.snapshot().totals.allowed, 5)
  })

  it('shows raw keys only when asked', () => {
    const collector = new DashboardCollector({ keys: 'raw' })
    collector.record('r', '203.0.113.7', 0, 1)
    const { topKeys } = collector.snapshot()
    assert.equal(topKeys.hashed, false)
    assert.deepEqual(
      topKeys.keys.map((k) => k.key),
      ['203.0.113.7'],
    )
  })

  it('lists every loaded rule, those not hit yet at zero after the busy ones, at most maxRules rows', () => {
    const ids = ['a', 'b', 'c', 'd', 'e']
    const collector = new DashboardCollector({ maxRules: 4, config: () => ({ rules: 5, files: [], lastReloadError: null, ids }) })
    assert.deepEqual(
      collector.snapshot().rules.map((r) => [r.rule, r.allowed, r.series]),
      [
        ['a', 0, undefined],
        ['b', 0, undefined],
        ['c', 0, undefined],
        ['d', 0, undefined],
      ],
    )
    collector.record('c', 'k', 2, 0)
    const snapshot = collector.snapshot()
    assert.deepEqual(
      snapshot.rules.map((r) => [r.rule, r.allowed]),
      [
        ['c', 2],
        ['a', 0],
        ['b', 0],
        ['d', 0],
      ],
    )
    assert.deepEqual(snapshot.config, { rules: 5, files: [], lastReloadError: null }, 'the ids are not repeated in config')
  })

  it('keeps at most maxRules rule rows; the rest share _other', () => {
    const collector = new DashboardCollector({ maxRules: 3 })
    for (let i = 0; i < 1000; i++) collector.record(`rule-${i}`, 'k', 1, 0)
    const rules = collector.snapshot().rules
    assert.equal(rules.length, 4)
    assert.equal(rules.find((rule) => rule.rule === OTHER_RULE)?.allowed, 997)
  })

  it("shows the regions' links when given them, with the time since each peer was heard", () => {
    const clock = new Clock()
    const status = {
      region: 'eu',
      degraded: ['ap'],
      peers: [
        {
          name: 'ap',
          connected: false,
          lastHeardAt: undefined,
          lagMs: undefined,
          exchangeMs: undefined,
          sent: 0,
          received: 0,
          failures: 3,
        },
        { name: 'us', connected: true, lastHeardAt: T0 - 250, lagMs: 310, exchangeMs: 60, sent: 12, received: 9, failures: 1 },
      ],
      counters: { merged: 20, unitsGiven: 5, unitsClaimed: 7, lost: 0, ticks: 30, failedTicks: 1 },
    }
    const collector = new DashboardCollector({ clock: clock.read, regions: () => status })
    assert.deepEqual(collector.snapshot().sync, {
      writeBack: null,
      leases: null,
      regions: {
        region: 'eu',
        degraded: ['ap'],
        peers: [
          { name: 'ap', up: false, lagMs: null, lastHeardMsAgo: null, sent: 0, received: 0, failures: 3 },
          { name: 'us', up: true, lagMs: 310, lastHeardMsAgo: 250, sent: 12, received: 9, failures: 1 },
        ],
        unitsGiven: 5,
        unitsClaimed: 7,
        lost: 0,
      },
    })
    assert.equal(new DashboardCollector({ regions: () => undefined }).snapshot().sync, null, 'no regions, no sync modes: nothing to show')
  })

  it('rejects options it cannot honour, naming the field', () => {
    assert.throws(() => new DashboardCollector({ historySeconds: 0 }), { code: 'INVALID_OPTION', message: /historySeconds/ })
    assert.throws(() => new DashboardCollector({ refreshMs: 1.5 }), { code: 'INVALID_OPTION', message: /refreshMs/ })
  })
})

describe('DashboardCollector.watch', () => {
  it('counts the decisions of a limiter on the embedded store, without latency (nothing to time)', async () => {
    const clock = new Clock()
    const policies = [{ name: 'per-minute', algorithm: 'fixed-window', limit: 2, period: '1m' }] as const
    const limiter = new RateLimiter({ clock: clock.read, policies })
    const collector = new DashboardCollector({ clock: clock.read })
    const stop = collector.watch(limiter)
    for (let i = 0; i < 5; i++) await limiter.limit('alice')
    await limiter.limit('bob', { cost: 2 })
    await limiter.get('bob') // a peek charges nothing and counts nothing
    let snapshot = collector.snapshot()
    assert.deepEqual(snapshot.totals, { allowed: 4, denied: 3 })
    assert.deepEqual(
      snapshot.rules.map((rule) => [rule.rule, rule.allowed, rule.denied]),
      [['per-minute', 4, 3]],
    )
    assert.equal(snapshot.store.kind, 'memory')
    assert.equal(snapshot.store.latency, null)
    assert.deepEqual(snapshot.config, { rules: 1, files: [], lastReloadError: null })
    stop()
    await limiter.limit('alice')
    snapshot = collector.snapshot()
    assert.deepEqual(snapshot.totals, { allowed: 4, denied: 3 })
    assert.equal(limiter.listenerCount('decision'), 0)
    await limiter.close()
  })

  it('times decisions a remote store made, and counts errors, fallbacks and the breaker', async () => {
    const clock = new Clock()
    const store = new FaultyStore(clock)
    const limiter = new RateLimiter({
      store,
      clock: clock.read,
      // The timeout on the test's timers: on real ones a busy machine timed the answers out.
      timers: clock.timers,
      onStoreError: 'closed',
      breaker: { failures: 1, cooldown: '1h' },
      policies: [{ algorithm: 'gcra', limit: 5, period: '1s' }],
    })
    const collector = new DashboardCollector({ clock: clock.read })
    collector.watch(limiter)
    await limiter.limit('k')
    await limiter.limit('k')
    clock.advance(1000)
    let snapshot = collector.snapshot()
    assert.equal(snapshot.store.latency?.samples, 2)
    assert.ok(snapshot.store.latency!.p50Ms! > 0)
    assert.equal(snapshot.series.storeLatencyP99Ms.at(-1), snapshot.store.latency!.p99Ms)
    store.health = 'throw'
    await limiter.limit('k')
    await limiter.limit('k')
    snapshot = collector.snapshot()
    assert.equal(snapshot.store.errors, 1)
    assert.equal(snapshot.store.breaker, 'open')
    assert.deepEqual(snapshot.store.fallbacks, { open: 0, closed: 2, local: 0 })
    assert.deepEqual(snapshot.totals, { allowed: 2, denied: 2 })
    await limiter.close()
    await store.close()
  })
})

describe('DashboardCollector.watch: lease and write-back state', () => {
  it("shows write-back's unflushed units: 5 after five admissions, 0 after limiter.flush()", async () => {
    const clock = new Clock()
    const store = new MemoryStore({ clock: clock.read })
    // No flush tick runs by itself: the clock's timers fire only when the test advances it.
    const policies = [{ name: 'wb', algorithm: 'fixed-window', limit: 100, period: '1h', sync: 'write-back', flushMs: 50 }] as const
    const limiter = new RateLimiter({ store, clock: clock.read, timers: clock.timers, policies, denyCache: false })
    const collector = new DashboardCollector({ clock: clock.read })
    collector.watch(limiter)
    assert.deepEqual(collector.snapshot().sync?.writeBack, { keys: 0, unflushed: 0, calls: 0, failedCalls: 0, replays: 0, refused: 0 })
    for (let i = 0; i < 5; i++) assert.ok((await limiter.limit('k')).allowed)
    let sync = collector.snapshot().sync!
    assert.deepEqual(sync.writeBack, { keys: 1, unflushed: 5, calls: 1, failedCalls: 0, replays: 0, refused: 0 })
    assert.equal(sync.leases, null)
    await limiter.flush()
    sync = collector.snapshot().sync!
    assert.equal(sync.writeBack!.unflushed, 0)
    assert.equal(sync.writeBack!.calls, 2, 'the first read, then the flush')
    assert.equal(store.evaluateSync({ key: 'k', policies: limiter.policies, cost: 0 }).results[0].remaining, 95, 'the store has them')
    assert.equal(JSON.parse(JSON.stringify(collector.snapshot())).sync.writeBack.unflushed, 0, 'as data.json carries it')
    assert.deepEqual(collector.snapshot().store.fallbacks, { open: 0, closed: 0, local: 0 }, 'write-back decisions are no fallback')
    await limiter.close()
  })

  it('shows the leases held and their units, and none after close()', async () => {
    const clock = new Clock()
    const store = new MemoryStore({ clock: clock.read })
    const policies = [{ name: 'leased', algorithm: 'fixed-window', limit: 1000, period: '1h', sync: 'lease', leaseMs: '1m' }] as const
    const limiter = new RateLimiter({ store, clock: clock.read, timers: clock.timers, policies })
    const collector = new DashboardCollector({ clock: clock.read })
    collector.watch(limiter)
    for (let i = 0; i < 20; i++) assert.ok((await limiter.limit('k')).allowed)
    const leases = collector.snapshot().sync!.leases!
    assert.equal(collector.snapshot().sync!.writeBack, null)
    assert.equal(leases.keys, 1)
    assert.equal(leases.leases, 1)
    assert.ok(leases.units > 0, JSON.stringify(leases))
    assert.ok(leases.acquired >= 1 && leases.returned === leases.acquired - 1, JSON.stringify(leases))
    // What the store holds for the key is what was admitted plus the units still leased here.
    const remaining = store.evaluateSync({ key: 'k', policies: limiter.policies, cost: 0 }).results[0].remaining
    assert.equal(1000 - remaining, 20 + leases.units)
    await limiter.close()
    const closed = collector.snapshot().sync!.leases!
    assert.deepEqual({ leases: closed.leases, units: closed.units }, { leases: 0, units: 0 })
    assert.equal(closed.returned, closed.acquired, 'every lease went back')
    assert.equal(store.evaluateSync({ key: 'k', policies: limiter.policies, cost: 0 }).results[0].remaining, 980)
  })

  it('counts auto keys and those on leases', async () => {
    const clock = new Clock()
    const store = new MemoryStore({ clock: clock.read })
    const policies = [
      { name: 'auto', algorithm: 'fixed-window', limit: 10_000, period: '1h', sync: 'auto', hotRate: 5, leaseMs: '1m' },
    ] as const
    const limiter = new RateLimiter({ store, clock: clock.read, timers: clock.timers, policies })
    const collector = new DashboardCollector({ clock: clock.read })
    collector.watch(limiter)
    await limiter.limit('cold')
    // A burst at one instant is far above 5 decisions per second.
    for (let i = 0; i < 30; i++) await limiter.limit('hot')
    const leases = collector.snapshot().sync!.leases!
    assert.deepEqual({ autoKeys: leases.autoKeys, autoOnLeases: leases.autoOnLeases }, { autoKeys: 2, autoOnLeases: 1 })
    assert.ok(leases.units > 0, JSON.stringify(leases))
    await limiter.close()
  })
})
