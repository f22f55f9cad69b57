// MemcachedStore on real memcached servers: options, key layout, the hash ring, reset, deadlines, and the limiter's failure modes.

import { test, before, after, describe } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import { createPolicies } from '../../../src/core/policy.js'
import { FloodgateError } from '../../../src/core/errors.js'
import { RateLimiter, type Decision, type RateLimiterOptions } from '../../../src/index.js'
import { HashRing, MemcachedStore } from '../../../src/memcached.js'
import { memcachedPolicyKey } from '../../../src/stores/memcached/keys.js'
import { MemcachedOps } from '../../../src/stores/memcached/protocol.js'
import { createServerPool } from '../../../src/stores/memcached/create-client.js'
import { startMemcached, type MemcachedProcess } from '../../support/memcached-server.js'

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/** Decides `key` until memcached answers (not a failure mode), for at most 20 s: a bound on a hang, not a speed test. */
async function untilFromStore(limiter: RateLimiter, key: string): Promise<Decision> {
  const deadline = Date.now() + 20_000
  let decision = await limiter.limit(key)
  while (decision.source !== 'store' && Date.now() < deadline) {
    await sleep(100)
    decision = await limiter.limit(key)
  }
  return decision
}

let servers: MemcachedProcess[]

before(async () => {
  servers = await Promise.all([startMemcached(), startMemcached(), startMemcached()])
})

after(async () => {
  await Promise.all(servers.map((server) => server.stop()))
})

/**
 * memjs options for a store whose server is up: memjs's own default (0.5 s a request, twice that to
 * connect) is sometimes outlasted by a first connection on a busy machine; these tests need the
 * server answering, not that speed. The fault tests below set short timeouts of their own.
 */
const PATIENT = { timeout: 10 }

const perHour = createPolicies([{ name: 'hour', algorithm: 'fixed-window', limit: 3, period: '1h' }])
const NOW = Date.UTC(2026, 0, 1, 12, 30)

test('options are checked, each bad one named', () => {
  const bad: [unknown, RegExp][] = [
    [null, /options/],
    [{}, /give servers/],
    [{ servers: [] }, /servers/],
    [{ servers: ['localhost'] }, /"localhost" is not host:port/],
    [{ servers: ['a:1', 'a:1'] }, /listed twice/],
    [{ servers: ['a:1'], prefix: 'has space' }, /prefix/],
    [{ servers: ['a:1'], prefix: 'a#b' }, /prefix/],
    [{ servers: ['a:1'], casRetries: -1 }, /casRetries/],
    [{ client: {} }, /memjs Client/],
    [{ client: { perform() {}, incrSeq() {}, getServer() {} }, servers: ['a:1'] }, /not both/],
  ]
  for (const [options, message] of bad) {
    assert.throws(
      () => new MemcachedStore(options as never),
      (error: unknown) => error instanceof FloodgateError && error.code === 'INVALID_OPTION' && message.test(error.message),
      JSON.stringify(options),
    )
  }
})

test('without memjs installed, a store made from servers says what to install', () => {
  assert.throws(
    () =>
      createServerPool(
        ['127.0.0.1:11211'],
        undefined,
        () => undefined,
        undefined,
        () => undefined,
      ),
    (error: unknown) => error instanceof FloodgateError && error.code === 'INVALID_OPTION' && /npm i memjs/.test(error.message),
  )
})

test('keys are printable ASCII of at most 250 bytes; long or odd user keys are hashed, and distinct keys stay distinct', () => {
  const [policy] = perHour
  fc.assert(
    fc.property(fc.string({ unit: 'binary', maxLength: 400 }), fc.string({ unit: 'binary', maxLength: 400 }), (a, b) => {
      const keyA = memcachedPolicyKey('fg:', a, policy)
      // The longest form a counter gets: a window start appended.
      assert.ok(Buffer.byteLength(`${keyA}:${NOW}`) <= 250, keyA)
      assert.match(keyA, /^[\x21-\x7e]+$/)
      if (a !== b) assert.notEqual(keyA, memcachedPolicyKey('fg:', b, policy))
    }),
  )
  assert.equal(memcachedPolicyKey('fg:', 'user:1', policy), 'fg:user:1|hour|fw')
  // A long user key is hashed into its route; a long policy name after it, so the route stays.
  assert.match(memcachedPolicyKey('fg:', 'x'.repeat(300), policy), /^fg:#[0-9a-f]{32}\|hour\|fw$/)
  const [long] = createPolicies([{ name: 'p'.repeat(240), algorithm: 'gcra', limit: 1, period: '1s' }])
  assert.match(memcachedPolicyKey('fg:', 'user:1', long), /^fg:user:1\|#[0-9a-f]{64}$/)
})

test('every record of one user key (each policy, each window) goes to one server: the one shardOf names', () => {
  const names = servers.map((server) => server.address)
  const ring = new HashRing(names)
  const store = new MemcachedStore({ servers: names, prefix: 'route:' })
  const policies = createPolicies([
    { name: 'short', algorithm: 'fixed-window', limit: 3, period: '1s' },
    { name: 'long', algorithm: 'sliding-window', limit: 3, period: '1h' },
    { name: 'n'.repeat(220), algorithm: 'gcra', limit: 3, period: '1m' },
  ])
  try {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 300 }), fc.nat(1_000), (key, window) => {
        const records = policies.flatMap((policy) => {
          const base = memcachedPolicyKey('route:', key, policy)
          return [base, `${base}:${window * 1000}`]
        })
        const homes = new Set(records.map((record) => ring.servers[ring.serverOfRecord(record)]))
        assert.deepEqual([...homes], [store.shardOf!(key)], JSON.stringify(key))
      }),
    )
  } finally {
    void store.close()
  }
})

test('the hash ring: the same key always on the same server in any list order; one server of n removed moves only its keys', () => {
  const names = servers.map((server) => server.address)
  const ring = new HashRing(names)
  const reversedNames = [...names].reverse()
  const reversed = new HashRing(reversedNames)
  const without = new HashRing(names.slice(0, 2))
  const counts = [0, 0, 0]
  let moved = 0
  for (let i = 0; i < 30_000; i++) {
    const key = `user:${i}`
    const at = ring.serverOf(key)
    counts[at]++
    assert.equal(reversedNames[reversed.serverOf(key)], names[at])
    const after = names[without.serverOf(key)]
    if (at < 2) assert.equal(after, names[at], `${key} moved though its server stayed`)
    else moved++
  }
  // An even spread: each of 3 servers holds a third, give or take (ketama's 160 points per server).
  for (const count of counts) assert.ok(count > 7_000 && count < 13_000, `spread ${counts.join('/')}`)
  assert.equal(moved, counts[2])
})

test('keys spread over every server, and each key is only on the server the ring names', async () => {
  const names = servers.map((server) => server.address)
  const store = new MemcachedStore({ servers: names, prefix: 'spread:', memjs: PATIENT })
  const ring = new HashRing(names)
  try {
    const keys = Array.from({ length: 30 }, (_, i) => `spread-user-${i}`)
    await store.evaluate(keys.map((key) => ({ key, policies: perHour, cost: 1, now: NOW })))
    const used = new Set<number>()
    for (const key of keys) {
      const counter = `${memcachedPolicyKey('spread:', key, perHour[0])}:${Math.floor(NOW / 3_600_000) * 3_600_000}`
      const home = ring.serverOfRecord(counter)
      assert.equal(store.shardOf?.(key), names[home], `${key}: shardOf names the server that holds it`)
      used.add(home)
      for (const [i, name] of names.entries()) {
        const single = new MemcachedStore({ servers: [name], memjs: PATIENT })
        try {
          const { value } = await new MemcachedOps(single.client).gets(counter)
          assert.equal(value?.toString(), i === home ? '1' : undefined, `${key} on ${name}`)
        } finally {
          await single.close()
        }
      }
    }
    assert.equal(used.size, 3, 'every server holds some keys')
  } finally {
    await store.close()
  }
})

test('charges, denies without counting the denial, peeks, refunds and resets', async () => {
  // Counters are per window: reset deletes those of the store's clock's window.
  const store = new MemcachedStore({ servers: [servers[0].address], prefix: 'basic:', clock: () => NOW, memjs: PATIENT })
  try {
    const policies = createPolicies([
      { name: 'fw', algorithm: 'fixed-window', limit: 3, period: '1h' },
      { name: 'tb', algorithm: 'token-bucket', limit: 5, period: '1h' },
    ])
    const decide = async (cost: number) => (await store.evaluate([{ key: 'u', policies, cost, now: NOW }]))[0]
    assert.equal((await decide(2)).allowed, true)
    const denied = await decide(2)
    assert.equal(denied.allowed, false)
    assert.deepEqual(
      denied.results.map((r) => r.remaining),
      [1, 3],
      'the denial charged neither policy',
    )
    assert.deepEqual(
      (await decide(0)).results.map((r) => r.remaining),
      [1, 3],
    )
    assert.deepEqual(
      (await decide(-1)).results.map((r) => r.remaining),
      [2, 4],
    )
    await store.reset('u', policies)
    assert.deepEqual(
      (await decide(0)).results.map((r) => r.remaining),
      [3, 5],
    )
  } finally {
    await store.close()
  }
})

test('bad requests are refused with INVALID_REQUEST, naming the field', async () => {
  const store = new MemcachedStore({ servers: [servers[0].address], prefix: 'bad:', memjs: PATIENT })
  try {
    const bad: [unknown, RegExp][] = [
      [{ key: 1, policies: perHour, cost: 1 }, /key must be a string/],
      [{ key: 'k', policies: [], cost: 1 }, /at least one policy/],
      [{ key: 'k', policies: perHour, cost: 1.5 }, /cost must be a whole number/],
      [{ key: 'k', policies: perHour, cost: 1, now: Number.NaN }, /now must be a finite number/],
    ]
    for (const [request, message] of bad) {
      await assert.rejects(
        store.evaluate([request as never]),
        (error: unknown) => error instanceof FloodgateError && error.code === 'INVALID_REQUEST' && message.test(error.message),
      )
    }
  } finally {
    await store.close()
  }
})

test('a request past its deadline is rejected with STORE_TIMEOUT and charges nothing', async () => {
  const store = new MemcachedStore({ servers: [servers[0].address], prefix: 'deadline:', memjs: PATIENT })
  try {
    const policies = createPolicies([{ name: 'gcra', algorithm: 'gcra', limit: 2, period: '1h' }])
    await assert.rejects(
      store.evaluate([{ key: 'late', policies, cost: 1, now: NOW, deadline: performance.now() - 1 }]),
      (error: unknown) => error instanceof FloodgateError && error.code === 'STORE_TIMEOUT',
    )
    const [peek] = await store.evaluate([{ key: 'late', policies, cost: 0, now: NOW }])
    assert.equal(peek.results[0].remaining, 2)
  } finally {
    await store.close()
  }
})

describe('memcached stopped and started again', () => {
  test('the limiter answers with its failure mode and the breaker opens; decisions go back to memcached after it returns', async (t) => {
    const server = servers[1]
    const store = new MemcachedStore({ servers: [server.address], prefix: 'fault:', memjs: { timeout: 0.2 } })
    const common: RateLimiterOptions = {
      store,
      policies: [{ name: 'ten', algorithm: 'fixed-window', limit: 10, period: '1h' }],
      timeout: '250ms',
      breaker: { failures: 3, cooldown: '300ms' },
      denyCache: false,
    }
    const open = new RateLimiter({ ...common, onStoreError: 'open' })
    const closed = new RateLimiter({ ...common, onStoreError: 'closed' })
    let breakerOpened = false
    closed.on('breaker-open', () => (breakerOpened = true))
    try {
      // Up: the first decisions connect (on a busy machine that may outlast the timeout once).
      assert.equal((await untilFromStore(open, 'a')).source, 'store')
      assert.equal((await untilFromStore(closed, 'a')).source, 'store')

      await server.stop()
      for (let i = 0; i < 6; i++) {
        const o = await open.limit('down')
        assert.deepEqual([o.source, o.allowed], ['fallback-open', true], `open call ${i}`)
        const c = await closed.limit('down')
        assert.deepEqual([c.source, c.allowed], ['fallback-closed', false], `closed call ${i}`)
      }
      assert.ok(breakerOpened, 'the breaker opened after repeated failures')

      await server.restart()
      for (const [mode, limiter] of [
        ['open', open],
        ['closed', closed],
      ] as const) {
        const decision = await untilFromStore(limiter, `back-${mode}`)
        t.diagnostic(`${mode}: decision source ${decision.source} after the restart`)
        assert.equal(decision.source, 'store', `${mode}: back to memcached`)
        assert.equal(decision.allowed, true)
      }
    } finally {
      await store.close()
    }
  })

  test('a paused server (SIGSTOP) times out into the failure mode; resumed, it decides again', async () => {
    const server = servers[2]
    const store = new MemcachedStore({ servers: [server.address], prefix: 'pause:', memjs: { timeout: 0.3 } })
    const limiter = new RateLimiter({
      store,
      policies: [{ algorithm: 'gcra', limit: 100, period: '1h' }],
      timeout: '100ms',
      onStoreError: 'open',
      denyCache: false,
      breaker: { failures: 100 },
    })
    try {
      assert.equal((await untilFromStore(limiter, 'p')).source, 'store')
      await server.pause()
      const paused = await limiter.limit('p')
      assert.equal(paused.source, 'fallback-open')
      server.resume()
      assert.equal((await untilFromStore(limiter, 'p')).source, 'store')
    } finally {
      server.resume()
      await store.close()
    }
  })
})
