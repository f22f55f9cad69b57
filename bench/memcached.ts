// `npm run bench:memcached`: decisions/s against one local memcached with 256 concurrent callers over
// 10k keys — Floodgate's MemcachedStore (counters and gets/cas algorithms) side by side with
// rate-limiter-flexible's RateLimiterMemcache and a raw memjs increment (one command per request:
// the floor) — then one hot key under contention: MemcachedStore's CAS retries per decision next to
// RedisStore on a local redis-server. Not a test: numbers only, printed as tables.
//
// Environment knobs: BENCH_ROUNDS (default 5), BENCH_ROUND_MS (default 1500 per contender and round).

import { createRequire } from 'node:module'
import { Redis } from 'ioredis'
import { RateLimiterMemcache, RateLimiterRes } from 'rate-limiter-flexible'
import { RateLimiter } from '../packages/floodgate/src/index.js'
import { MemcachedStore } from '../packages/floodgate/src/memcached.js'
import { RedisStore } from '../packages/floodgate/src/redis.js'
import type { AlgorithmName, PolicyOptions } from '../packages/floodgate/src/core/policy.js'
import { startMemcached } from '../packages/floodgate/test/support/memcached-server.js'
import { startRedis } from '../packages/floodgate/test/support/redis-server.js'
import { formatCount, interleavedRounds, printTable, ratio, roundsContender, Tallies, type Contender, type RoundLoad } from './support.js'

const CALLERS = 256
const HOT_CALLERS = 64
const KEYS = 10_000
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5)
const ROUND_MS = Number(process.env.BENCH_ROUND_MS ?? 1500)
const MAX_OPS_PER_ROUND = 2_000_000
// High enough that every contender admits every request: all of them do the same writing work.
const LIMIT = 1_000_000_000
const PERIOD_S = 3600

const ALGORITHMS: AlgorithmName[] = ['fixed-window', 'sliding-window', 'gcra', 'token-bucket']
const HOT_ALGORITHMS: AlgorithmName[] = ['fixed-window', 'gcra', 'token-bucket']

const requireHere = createRequire(import.meta.url)
const memjs = requireHere('memjs') as { Client: { create(servers: string, options: object): MemjsBench } }
const Memcached = requireHere('memcached') as new (servers: string, options: object) => { end(): void }

interface MemjsBench {
  increment(key: string, amount: number, options: { initial: number; expires: number }): Promise<{ value: number | null }>
  close(): void
}

const tallies = new Tallies()
const LOAD: RoundLoad = { callers: CALLERS, durationMs: ROUND_MS, maxOps: MAX_OPS_PER_ROUND }

// Keys are built per request from the round and the call number, as an app builds them from a request.
const keyOf = (round: string, i: number): string => `${round}:${(i * 7919) % KEYS}`

async function main(): Promise<void> {
  const memcached = await startMemcached()
  const redis = await startRedis()
  const stores: { close(): Promise<void> | void }[] = []
  try {
    console.log(`Floodgate memcached bench: memcached on ${memcached.address} (-t 2), redis-server on ${redis.url}`)
    console.log(`${CALLERS} concurrent callers, ${formatCount(KEYS)} keys, ${ROUNDS} interleaved rounds of ${ROUND_MS}ms`)
    console.log('long-lived limiters and clients, warmed before the rounds; keys built per request')

    const contenders: Contender[] = []
    for (const algorithm of ALGORITHMS) {
      const store = new MemcachedStore({ servers: [memcached.address], memjs: { timeout: 5 } })
      stores.push(store)
      const limiter = new RateLimiter({ store, policies: [{ algorithm, limit: LIMIT, period: `${PERIOD_S}s` }], timeout: '5s' })
      contenders.push(limiterContender(`floodgate ${algorithm}`, limiter, CALLERS, keyOf))
    }
    const client = new Memcached(memcached.address, { poolSize: 10 })
    stores.push({ close: () => client.end() })
    const rlf = new RateLimiterMemcache({ storeClient: client, points: LIMIT, duration: PERIOD_S, keyPrefix: 'rlf' })
    contenders.push(rlfContender(rlf))
    const raw = memjs.Client.create(memcached.address, { timeout: 5, logger: { log: () => {} } })
    stores.push({ close: () => raw.close() })
    contenders.push(rawIncrContender(raw))

    for (const contender of contenders) await contender.measure() // warm-up: connections, JIT
    const results = await interleavedRounds(contenders, ROUNDS, logRound)
    const rlfMedian = results.find((r) => r.name === 'rate-limiter-flexible RateLimiterMemcache')!.median
    const floor = results.find((r) => r.name === 'raw memjs incr')!.median
    printTable(
      ['contender', 'median decisions/s', 'min', 'max', 'vs rlf', 'vs raw incr'],
      results.map((r) => [...spread(r), ratio(r.median, rlfMedian), ratio(r.median, floor)]),
      'Throughput over 10k keys (median of rounds; one memcached, 2 threads; the machine has 2 cores for everything)',
    )

    // One hot key: every caller on the same key, so CAS writes collide.
    const hot: Contender[] = []
    const retries = new Map<string, () => number>()
    for (const algorithm of HOT_ALGORITHMS) {
      const store = new MemcachedStore({ servers: [memcached.address], memjs: { timeout: 5 }, casRetries: 1000 })
      stores.push(store)
      const name = `memcached ${algorithm}, one key`
      const limiter = new RateLimiter({ store, policies: [{ algorithm, limit: LIMIT, period: `${PERIOD_S}s` }], timeout: '5s' })
      hot.push(limiterContender(name, limiter, HOT_CALLERS, (round) => `hot:${round}`))
      retries.set(name, () => store.casStats.retries)
    }
    const redisClient = new Redis({ host: redis.host, port: redis.port, enableAutoPipelining: true })
    stores.push({ close: () => redisClient.disconnect() })
    for (const algorithm of ['gcra', 'token-bucket'] as AlgorithmName[]) {
      const policies: PolicyOptions[] = [{ algorithm, limit: LIMIT, period: `${PERIOD_S}s` }]
      const limiter = new RateLimiter({ store: new RedisStore({ client: redisClient }), policies, timeout: '5s' })
      hot.push(limiterContender(`redis ${algorithm}, one key`, limiter, HOT_CALLERS, (round) => `hot:${round}`))
    }
    for (const contender of hot) await contender.measure()
    const retriesBefore = new Map([...retries].map(([name, read]) => [name, read()]))
    const callsBefore = new Map(hot.map((contender) => [contender.name, tallies.of(contender.name).calls]))
    const hotResults = await interleavedRounds(hot, ROUNDS, logRound)
    printTable(
      ['contender', 'median decisions/s', 'min', 'max', 'CAS retries per decision'],
      hotResults.map((r) => {
        const calls = tallies.of(r.name).calls - (callsBefore.get(r.name) ?? 0)
        const read = retries.get(r.name)
        const perDecision = read === undefined ? '-' : ((read() - (retriesBefore.get(r.name) ?? 0)) / Math.max(1, calls)).toFixed(2)
        return [...spread(r), perDecision]
      }),
      `One hot key, ${HOT_CALLERS} concurrent callers (median of rounds)`,
    )
    printTable(
      ['contender', 'calls', 'denied', 'failed', 'first failure'],
      tallies.rows(),
      'Denials and failures over all rounds and warm-ups (all should be 0)',
    )
  } finally {
    for (const store of stores) await store.close()
    await memcached.stop()
    await redis.stop()
  }
}

function logRound(name: string, round: number, value: number): void {
  console.log(`  round ${round + 1} ${name}: ${formatCount(value)}/s`)
}

/** A result's name, median, min and max, as table cells. */
function spread(r: { name: string; samples: number[]; median: number }): string[] {
  return [r.name, formatCount(r.median), formatCount(Math.min(...r.samples)), formatCount(Math.max(...r.samples))]
}

function limiterContender(name: string, limiter: RateLimiter, callers: number, key: (round: string, i: number) => string): Contender {
  return roundsContender(
    name,
    { ...LOAD, callers },
    tallies,
    name,
    async (prefix, i) => {
      const decision = await limiter.limit(key(prefix, i))
      if (decision.source !== 'store') throw new Error(`decision came from ${decision.source}`)
      return decision
    },
    (decision) => !decision.allowed,
  )
}

function rlfContender(limiter: RateLimiterMemcache): Contender {
  return roundsContender(
    'rate-limiter-flexible RateLimiterMemcache',
    LOAD,
    tallies,
    'rlf',
    (prefix, i) =>
      limiter.consume(keyOf(prefix, i)).then(
        () => false,
        (reason: unknown) => {
          if (reason instanceof RateLimiterRes) return true
          throw reason
        },
      ),
    (denied) => denied,
  )
}

function rawIncrContender(client: MemjsBench): Contender {
  return roundsContender(
    'raw memjs incr',
    LOAD,
    tallies,
    'raw',
    (prefix, i) => client.increment(keyOf(prefix, i), 1, { initial: 1, expires: PERIOD_S }),
    () => false,
  )
}

main().catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
