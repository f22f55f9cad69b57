// MemcachedStore.setServers on real memcached servers: keys stay on servers that stay, decisions in flight finish on
// the server they began on (a removed one is closed after them), no decision is lost under load, breakers follow the list.

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { createPolicies } from '../../../src/core/policy.js'
import { FloodgateError } from '../../../src/core/errors.js'
import { RateLimiter } from '../../../src/index.js'
import { MemcachedStore } from '../../../src/memcached.js'
import { adminCommand, startMemcached, type MemcachedProcess } from '../../support/memcached-server.js'

let servers: MemcachedProcess[]
let a: string
let b: string
let c: string

before(async () => {
  servers = await Promise.all([startMemcached(), startMemcached(), startMemcached()])
  ;[a, b, c] = servers.map((server) => server.address)
})

after(async () => {
  await Promise.all(servers.map((server) => server.stop()))
})

/** memjs options: a patient timeout, as these tests need answers, not a speed (see memcached-store.test.ts). */
const PATIENT = { timeout: 10 }
const hourly = createPolicies([{ name: 'hour', algorithm: 'fixed-window', limit: 100, period: '1h' }])
const NOW = Date.UTC(2026, 0, 1, 12, 30)
const keys = Array.from({ length: 300 }, (_, i) => `user:${i}`)

/** What `key` has used of `hourly` on the store's current servers (a peek). */
async function used(store: MemcachedStore, key: string): Promise<number> {
  const [response] = await store.evaluate([{ key, policies: hourly, cost: 0, now: NOW }])
  return 100 - response.results[0].remaining
}

function rejectsWith(message: RegExp): (error: unknown) => boolean {
  return (error) => error instanceof FloodgateError && error.code === 'INVALID_OPTION' && message.test(error.message)
}

/** memcached's count of open connections (its `stats`), read over a connection of our own. */
async function connectionsOf(server: MemcachedProcess): Promise<number> {
  const match = /STAT curr_connections (\d+)/.exec(await adminCommand(server, 'stats'))
  assert.ok(match, 'memcached reports curr_connections')
  return Number(match[1])
}

/** Reads `read` until `done` holds, for at most 20 s: a bound on a hang, not a speed test. */
async function until<T>(read: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
  const deadline = Date.now() + 20_000
  let value = await read()
  while (!done(value) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 20))
    value = await read()
  }
  return value
}

test('a server added takes over only its share: every other key stays, counted on, on its server', async () => {
  const store = new MemcachedStore({ servers: [a, b], prefix: 'grow:', memjs: PATIENT })
  const lists: (readonly string[])[] = []
  store.on('servers', (list) => lists.push(list))
  try {
    await store.evaluate(keys.map((key) => ({ key, policies: hourly, cost: 3, now: NOW })))
    const before = new Map(keys.map((key) => [key, store.shardOf!(key)]))
    await store.setServers([a, b, c])
    assert.deepEqual(lists, [[a, b, c]])
    assert.deepEqual(store.shards!(), [a, b, c])
    let movedToC = 0
    for (const key of keys) {
      const now = store.shardOf!(key)
      if (now === c) {
        movedToC++
        assert.equal(await used(store, key), 0, `${key} moved to the new server and starts afresh`)
      } else {
        assert.equal(now, before.get(key), `${key} stayed on its server`)
        assert.equal(await used(store, key), 3, `${key} keeps its count`)
      }
    }
    // About a third: ketama's even spread (160 points per server).
    assert.ok(movedToC > 50 && movedToC < 150, `${movedToC} of ${keys.length} keys went to the new server`)

    // One removed: only its keys move, and the others keep counting where they were.
    const onA = keys.filter((key) => store.shardOf!(key) === a)
    const onC = keys.filter((key) => store.shardOf!(key) === c)
    await store.setServers(`${a},${c}`)
    for (const key of onA) assert.equal(store.shardOf!(key), a)
    for (const key of onC) assert.equal(store.shardOf!(key), c)
    for (const key of onA.slice(0, 10)) assert.equal(await used(store, key), 3)
    // The same servers in another order change nothing.
    await store.setServers([c, a])
    assert.equal(lists.length, 2)
  } finally {
    await store.close()
  }
})

test('bad lists are refused and change nothing; a store over a client of its own, or closed, cannot change servers', async () => {
  const store = new MemcachedStore({ servers: [a, b], prefix: 'bad:', memjs: PATIENT })
  try {
    for (const bad of [[], '', ['nohost'], [a, a], [42]] as unknown[]) {
      await assert.rejects(store.setServers(bad as string[]), rejectsWith(/MemcachedStore servers/), JSON.stringify(bad))
    }
    assert.deepEqual(store.shards!(), [a, b])
    const [answer] = await store.evaluate([{ key: 'k', policies: hourly, cost: 1, now: NOW }])
    assert.equal(answer.allowed, true, 'the old list still decides')
  } finally {
    await store.close()
  }
  await assert.rejects(store.setServers([a]), rejectsWith(/closed/))
  const own = new MemcachedStore({ servers: [a], memjs: PATIENT })
  const wrapper = new MemcachedStore({ client: own.client })
  await assert.rejects(wrapper.setServers([a, b]), rejectsWith(/client of your own/))
  await own.close()
})

test('a decision in flight on a removed server is answered by it; its connection closes after, not before', async () => {
  const victim = servers[1]
  const store = new MemcachedStore({ servers: [a, b, c], prefix: 'inflight:', memjs: PATIENT })
  const key = keys.find((k) => store.shardOf!(k) === b) as string
  try {
    // Connected to every server first, and the key counted twice on its server.
    await store.evaluate(keys.map((k) => ({ key: k, policies: hourly, cost: 1, now: NOW })))
    await store.evaluate([{ key, policies: hourly, cost: 1, now: NOW }])
    const open = await connectionsOf(victim)
    await victim.pause()
    let answered = false
    const inFlight = store.evaluate([{ key, policies: hourly, cost: 1, now: NOW }]).then(([response]) => {
      answered = true
      return response
    })
    let closedAfterAnswer: boolean | undefined
    const closed = store.setServers([a, c]).then(() => (closedAfterAnswer = answered))
    assert.notEqual(store.shardOf!(key), b, 'new decisions of the key go to the remaining servers')
    const [moved] = await store.evaluate([{ key, policies: hourly, cost: 1, now: NOW }])
    assert.equal(moved.results[0].remaining, 99, 'on its new server the key starts afresh')
    victim.resume()
    const response = await inFlight
    assert.equal(response.allowed, true)
    assert.equal(response.results[0].remaining, 97, 'the removed server counted it: its third unit')
    await closed
    assert.equal(closedAfterAnswer, true, 'the removed server was closed only after its decision was answered')
    // memcached sees the store's connection go: one fewer than while it was listed.
    const left = await until(
      () => connectionsOf(victim),
      (n) => n < open,
    )
    assert.equal(left, open - 1)
  } finally {
    victim.resume()
    await store.close()
  }
})

test('a decision that spans a swap keeps to its server: its later steps and its refund go where its first step went', async () => {
  const victim = servers[1]
  const store = new MemcachedStore({ servers: [a, b, c], prefix: 'span:', memjs: PATIENT })
  // Read straight from the server that holds the key before the swap.
  const direct = new MemcachedStore({ servers: [b], prefix: 'span:', memjs: PATIENT })
  const policies = createPolicies([
    { name: 'wide', algorithm: 'fixed-window', limit: 10, period: '1h' },
    { name: 'narrow', algorithm: 'fixed-window', limit: 1, period: '1h' },
  ])
  const key = keys.find((k) => store.shardOf!(k) === b) as string
  const remaining = async (on: MemcachedStore) =>
    (await on.evaluate([{ key, policies, cost: 0, now: NOW }]))[0].results.map((result) => result.remaining)
  try {
    // narrow is used up on b; wide has 9 left there.
    assert.equal((await store.evaluate([{ key, policies, cost: 1, now: NOW }]))[0].allowed, true)
    assert.deepEqual(await remaining(direct), [9, 0])
    await victim.pause()
    // Its first step (wide's incr) waits on the paused b while the list drops b.
    const spanning = store.evaluate([{ key, policies, cost: 1, now: NOW }])
    const closed = store.setServers([a, c])
    victim.resume()
    const [response] = await spanning
    // narrow was judged on b, where it is used up: denied, and wide's charge taken back on b.
    assert.equal(response.allowed, false)
    assert.deepEqual(await remaining(direct), [9, 0], 'the charge on b was refunded on b')
    await closed
    assert.deepEqual(await remaining(store), [10, 1], 'the key starts afresh on its new server, untouched by that decision')
  } finally {
    victim.resume()
    await Promise.all([store.close(), direct.close()])
  }
})

test('under load, swaps back and forth lose no decision: every one is answered by memcached', async () => {
  const store = new MemcachedStore({ servers: [a, b], prefix: 'load:', memjs: PATIENT })
  const unavailable: string[] = []
  store.on('unavailable', (_error, shard) => unavailable.push(shard))
  const big = createPolicies([{ name: 'big', algorithm: 'gcra', limit: 1_000_000, period: '1h' }])
  try {
    const lists = [[a, b, c], [a, c], [b], [c, b, a], [a, b]]
    let answered = 0
    const waves: Promise<void>[] = []
    const swaps: Promise<void>[] = []
    for (const list of lists) {
      // A wave of decisions in flight, then the list changes under it.
      waves.push(
        store.evaluate(keys.map((key) => ({ key, policies: big, cost: 1, now: NOW }))).then((responses) => {
          for (const response of responses) assert.equal(response.allowed, true)
          answered += responses.length
        }),
      )
      swaps.push(store.setServers(list))
    }
    await Promise.all([...waves, ...swaps])
    assert.equal(answered, keys.length * lists.length)
    assert.deepEqual(unavailable, [])
    assert.deepEqual(store.shards!(), [a, b])
  } finally {
    await store.close()
  }
})

test("the limiter forgets a removed server's open breaker, and its keys are decided by their new server", async () => {
  const victim = servers[2]
  const store = new MemcachedStore({ servers: [a, b, c], prefix: 'breaker:', memjs: PATIENT })
  const limiter = new RateLimiter({
    store,
    policies: [{ algorithm: 'fixed-window', limit: 100, period: '1h' }],
    onStoreError: 'open',
    timeout: '30s',
    breaker: { failures: 1, cooldown: '1h' },
    denyCache: false,
  })
  const opened: string[] = []
  const closed: string[] = []
  limiter.on('breaker-open', (shard) => opened.push(shard))
  limiter.on('breaker-close', (shard) => closed.push(shard))
  const key = keys.find((k) => store.shardOf!(k) === c) as string
  try {
    await victim.stop()
    assert.equal((await limiter.limit(key)).source, 'fallback-open')
    assert.deepEqual(opened, [c])
    await store.setServers([a, b])
    assert.deepEqual(closed, [c], 'the removed server’s breaker is announced closed')
    const decision = await limiter.limit(key)
    assert.equal(decision.source, 'store', 'the key is decided by its new server at once')
  } finally {
    await victim.restart()
    await store.close()
  }
})
