// sync: 'auto' on a private redis-server: a cold key costs exactly what `sync: 'always'` costs (the
// same script, one call a decision), a key that turns hot gets a lease, a key forgotten gives its
// lease back, and processes mixing leases and exact decisions on one key never pass the limit.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { fileURLToPath } from 'node:url'
import { Redis } from 'ioredis'
import type { PolicyOptions } from '../../../src/core/policy.js'
import { RateLimiter } from '../../../src/index.js'
import { RedisStore } from '../../../src/redis.js'
import type { Timers } from '../../../src/limiter/timeout.js'
import { startRedis, type RedisProcess } from '../../support/redis-server.js'
import { Workers } from '../../support/workers.js'
import type { AutoWorkerConfig, AutoWorkerReport } from './auto-worker.js'

const WEEK = 604_800_000
const fixedWindow = (limit: number, sync: PolicyOptions['sync'], extra: Partial<PolicyOptions> = {}): PolicyOptions[] => [
  { name: 'fw', algorithm: 'fixed-window', limit, period: '1w', sync, ...extra },
]
// The algorithms `auto` serves, each as one policy of `limit` a week (a bucket's burst is its limit:
// it refills about 0.002 units a second, none that a test sees).
const ALGORITHMS = ['fixed-window', 'sliding-window', 'token-bucket', 'gcra'] as const
const weekly = (algorithm: (typeof ALGORITHMS)[number], limit: number, sync: PolicyOptions['sync'], extra: Partial<PolicyOptions> = {}) => [
  { name: algorithm, algorithm, limit, period: '1w', sync, ...extra } as PolicyOptions,
]

let server: RedisProcess
const clients: Redis[] = []
const limiters: RateLimiter[] = []
const fast = new Workers(fileURLToPath(new URL('./auto-worker.ts', import.meta.url)))
const paced = new Workers(fileURLToPath(new URL('./auto-worker.ts', import.meta.url)))

before(async () => {
  server = await startRedis()
})

after(async () => {
  fast.killAll()
  paced.killAll()
  for (const limiter of limiters) await limiter.close()
  for (const client of clients) client.disconnect()
  await server?.stop()
})

function limiterOn(policies: PolicyOptions[], options: { timers?: Timers; maxKeys?: number } = {}): RateLimiter {
  const client = new Redis({ host: server.host, port: server.port })
  clients.push(client)
  const limiter = new RateLimiter({
    store: new RedisStore({ client }),
    policies,
    timeout: '30s',
    ...(options.timers === undefined ? {} : { timers: options.timers }),
    ...(options.maxKeys === undefined ? {} : { sync: { maxKeys: options.maxKeys } }),
  })
  limiters.push(limiter)
  return limiter
}

// What `key` has left, read by an exact peek (a fixed window counts leased blocks in its count).
async function remaining(key: string, limit: number, policies: PolicyOptions[] = fixedWindow(limit, 'always')): Promise<number> {
  const peek = limiterOn(policies.map((policy) => ({ ...policy, sync: 'always', hotRate: undefined, leaseMs: undefined })))
  return (await peek.limit(key, { cost: 0 })).remaining
}

describe("sync: 'auto' on Redis", () => {
  for (const algorithm of ALGORITHMS)
    it(`${algorithm}: decides a cold key with exact's own script, one call a decision, and never reads a ledger`, async () => {
      await coldCostsExact(algorithm)
    })

  for (const algorithm of ALGORITHMS)
    it(`${algorithm}: a key moving hot, cold, hot again loses and doubles no charge`, async () => {
      const limit = 1000
      const policies = weekly(algorithm, limit, 'auto', { hotRate: 20, leaseMs: '1m' })
      // A clock that moves only here, and timers that never fire: heat follows the decisions below.
      let now = 1_000_000
      const timers: Timers = { now: () => now, setTimeout: () => ({}) }
      const auto = limiterOn(policies, { timers })
      const key = `moving-${algorithm}`
      const window = Math.floor(Date.now() / WEEK)
      let admitted = 0
      const phase = async (count: number, gapMs: number) => {
        const sources = new Set<string>()
        for (let i = 0; i < count; i++) {
          now += gapMs
          const decision = await auto.limit(key)
          if (decision.allowed) admitted++
          sources.add(decision.source)
        }
        return [...sources].sort()
      }
      // 50/s: hot, on a lease; then quiet and 1/s: cold, its lease given back, exact calls; then hot again.
      assert.ok((await phase(60, 20)).includes('lease'), 'hot: no decision from a lease')
      now += 5000
      assert.deepEqual(await phase(10, 1000), ['store'], 'cold: every decision an exact store call')
      assert.ok(auto.syncState().leases!.units === 0, 'cold: a lease still held')
      assert.ok((await phase(60, 20)).includes('lease'), 'hot again: no decision from a lease')
      assert.equal(admitted, 130)
      await auto.close()
      if (Math.floor(Date.now() / WEEK) !== window) return
      // Every lease given back at close: exactly what was admitted is charged.
      assert.equal(await remaining(key, limit, policies), limit - admitted)
    })

  it('two processes on leases and two deciding exactly never admit more than the limit on one key, for every algorithm', async () => {
    for (const algorithm of ALGORITHMS.slice(1)) {
      const limit = 3000
      const policies = weekly(algorithm, limit, 'auto', { hotRate: 500 })
      const key = `shared-${algorithm}`
      const window = Math.floor(Date.now() / WEEK)
      const config = { host: server.host, port: server.port, key, policies }
      const [hot, cold] = await Promise.all([
        fast.run<AutoWorkerConfig, AutoWorkerReport>(2, { ...config, requests: 2000, inflight: 32, pauseMs: 0 }),
        paced.run<AutoWorkerConfig, AutoWorkerReport>(2, { ...config, requests: 200, inflight: 1, pauseMs: 5 }),
      ])
      if (Math.floor(Date.now() / WEEK) !== window) continue
      const reports = [...hot, ...cold]
      const admitted = reports.reduce((sum, report) => sum + report.admitted, 0)
      assert.ok(
        hot.every((report) => report.lease > 0),
        `${algorithm}: the fast processes decided from leases: ${JSON.stringify(hot)}`,
      )
      assert.ok(
        cold.every((report) => report.lease === 0 && report.store > 0),
        `${algorithm}: the paced processes decided in the store: ${JSON.stringify(cold)}`,
      )
      assert.ok(admitted <= limit, `${algorithm}: admitted ${admitted} > ${limit}`)
      assert.equal(await remaining(key, limit, policies), limit - admitted, algorithm)
    }
  })

  async function coldCostsExact(algorithm: (typeof ALGORITHMS)[number]): Promise<void> {
    const exact = limiterOn(weekly(algorithm, 1000, 'always'))
    const auto = limiterOn(weekly(algorithm, 1000, 'auto'))
    // Scripts loaded before watching, so every call below is an EVALSHA naming its script.
    await exact.limit('warm-exact')
    await auto.limit('warm-auto')
    const monitorClient = new Redis({ host: server.host, port: server.port })
    clients.push(monitorClient)
    const monitor = await monitorClient.monitor()
    const calls: string[][] = []
    // Only the client's own commands: MONITOR also lists what a script calls, tagged 'lua'.
    monitor.on('monitor', (_time: string, args: string[], source: string) => {
      if (!source.startsWith('lua')) calls.push(args)
    })
    // Each key asked once, one decision at a time: cold on this instance, one store call each.
    for (let i = 0; i < 20; i++) assert.equal((await exact.limit(`exact-key-${i}`)).source, 'store')
    for (let i = 0; i < 20; i++) assert.equal((await auto.limit(`auto-key-${i}`)).source, 'store')
    // MONITOR shows a command once it ran; a PING round trip after the last puts it in the feed.
    const pinger = monitorClient.duplicate()
    clients.push(pinger)
    await pinger.ping()
    await waitFor(() => calls.some((args) => args.some((arg) => arg.includes('auto-key-19'))), 'the last auto call in MONITOR')
    monitor.disconnect()
    const naming = (word: string) => calls.filter((args) => args.some((arg) => arg.includes(word)))
    const exactCalls = naming('exact-key-')
    const autoCalls = naming('auto-key-')
    assert.equal(exactCalls.length, 20)
    assert.equal(autoCalls.length, 20, `auto's cold decisions made ${autoCalls.length} calls`)
    const scripts = (list: string[][]) => [...new Set(list.map((args) => `${args[0].toLowerCase()} ${args[1]}`))]
    assert.deepEqual(scripts(autoCalls), scripts(exactCalls), "auto's cold path runs exact's script")
    assert.ok(!autoCalls.some((args) => args.some((arg) => arg.endsWith('#l'))), 'no ledger key read')
  }

  it('moves a key asked at 50/s to leases (a lease covers many of its decisions)', async () => {
    const limit = 100_000
    const auto = limiterOn(fixedWindow(limit, 'auto'))
    const window = Math.floor(Date.now() / WEEK)
    let admitted = 0
    let first: number | undefined
    // Real time, paced: wait for the state (a decision from a lease), bounded by a count, not a time.
    for (let i = 0; i < 400 && first === undefined; i++) {
      const decision = await auto.limit('warming')
      if (decision.allowed) admitted++
      if (decision.source === 'lease') first = i
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    assert.ok(first !== undefined, 'never answered from a lease')
    if (Math.floor(Date.now() / WEEK) !== window) return
    // The lease's block is charged in the store beyond what was admitted.
    assert.ok((await remaining('warming', limit)) < limit - admitted, 'no block charged in the store')
  })

  it('at the default hotRate (12 a second): a key at 8 a second stays exact, one at 30 a second moves to leases', async () => {
    // The limiter's clock moves only here, so the paces are exact whatever the machine's speed.
    let now = 1_000_000
    const timers: Timers = { now: () => now, setTimeout: () => ({}) }
    const auto = limiterOn(fixedWindow(100_000, 'auto'), { timers })
    const sources = async (key: string, perSecond: number, count: number) => {
      const seen: string[] = []
      for (let i = 0; i < count; i++) {
        now += 1000 / perSecond
        seen.push((await auto.limit(key)).source)
      }
      return seen
    }
    // 8 a second: hot at the former default (5), below today's; every decision an exact store call.
    assert.deepEqual([...new Set(await sources('lukewarm', 8, 60))], ['store'])
    const hot = await sources('hot', 30, 90)
    assert.ok(
      hot.slice(-30).every((source) => source === 'lease'),
      `at 30 a second: ${hot.slice(-30).join(',')}`,
    )
  })

  it('gives the lease of a key it stops following back to the store', async () => {
    const limit = 100_000
    // A clock that moves only here, and timers that never fire: no sweep gives anything back.
    let now = 1_000_000
    const timers: Timers = { now: () => now, setTimeout: () => ({}) }
    // Leases of a minute: the one taken here is still live when the key is forgotten (an expired
    // one would have come back by itself).
    const auto = limiterOn(fixedWindow(limit, 'auto', { hotRate: 20, leaseMs: '1m' }), { timers, maxKeys: 2 })
    const window = Math.floor(Date.now() / WEEK)
    let admitted = 0
    for (let i = 0; i < 60; i++) {
      now += 20
      if ((await auto.limit('followed')).allowed) admitted++
    }
    assert.ok(auto.syncState().leases!.units > 0, 'no lease held after 60 decisions at 50/s')
    // Quiet for 5 s (its rate decays to e^-5 of 50/s), then two new keys: past maxKeys the cooled key is forgotten.
    now += 5000
    assert.equal((await auto.limit('other-1')).allowed, true)
    assert.equal((await auto.limit('other-2')).allowed, true)
    if (Math.floor(Date.now() / WEEK) !== window) return
    await waitFor(async () => (await remaining('followed', limit)) === limit - admitted, 'the unused units back in the store')
  })

  it('two processes on leases and two deciding exactly never admit more than the limit on one key', async () => {
    const limit = 3000
    const policies = fixedWindow(limit, 'auto', { hotRate: 500 })
    for (let round = 0; round < 2; round++) {
      const key = `shared-${round}`
      const window = Math.floor(Date.now() / WEEK)
      const config = { host: server.host, port: server.port, key, policies }
      const [hot, cold] = await Promise.all([
        fast.run<AutoWorkerConfig, AutoWorkerReport>(2, { ...config, requests: 2000, inflight: 32, pauseMs: 0 }),
        // At most 1 decision per 5 ms: below hotRate, so every one is a store call, exact.
        paced.run<AutoWorkerConfig, AutoWorkerReport>(2, { ...config, requests: 200, inflight: 1, pauseMs: 5 }),
      ])
      if (Math.floor(Date.now() / WEEK) !== window) continue
      const reports = [...hot, ...cold]
      const admitted = reports.reduce((sum, report) => sum + report.admitted, 0)
      assert.ok(
        hot.every((report) => report.lease > 0),
        `the fast processes decided from leases: ${JSON.stringify(hot)}`,
      )
      assert.ok(
        cold.every((report) => report.lease === 0 && report.store > 0),
        `the paced processes decided in the store: ${JSON.stringify(cold)}`,
      )
      assert.ok(admitted <= limit, `admitted ${admitted} > ${limit}`)
      // Every lease was given back at close: the key has exactly what was not admitted left.
      assert.equal(await remaining(key, limit), limit - admitted)
    }
  })
})

async function waitFor(condition: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (await condition()) return
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  assert.fail(`never saw ${what}`)
}
