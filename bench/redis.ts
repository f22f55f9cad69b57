// `npm run bench:redis`: decisions/s against one local redis-server with 256 concurrent callers
// over 10k keys — Floodgate (several algorithms) side by side with rate-limiter-flexible,
// rate-limit-redis and raw autopipelined INCR (one command per request: the physical limit), with
// Redis CPU per decision and every contender's denials and failures (all should be zero). Not a
// test: numbers only, printed as tables. Memory per key: `npm run bench:redis-memory`.
//
// Environment knobs: BENCH_ROUNDS (default 5), BENCH_ROUND_MS (default 1500 per contender and
// round), BENCH_ONLY (a regular expression: only the contenders whose names match run, beside the
// exact gcra row and the peers every ratio needs; for iterating, not for reporting; the auto tables
// run when it matches 'auto'). The auto tables have their own knobs, in bench/auto.ts.

import { Redis, type RedisOptions } from 'ioredis'
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible'
import { RedisStore as RateLimitRedisStore } from 'rate-limit-redis'
import { RateLimiter } from '../packages/floodgate/src/index.js'
import { RedisStore } from '../packages/floodgate/src/redis.js'
import { createPolicies, type AlgorithmName, type PolicyOptions } from '../packages/floodgate/src/core/policy.js'
import { startRedis, type RedisProcess } from '../packages/floodgate/test/support/redis-server.js'
import {
  decisionLiteral,
  formatCount,
  interleavedRounds,
  median,
  printTable,
  ratio,
  roundsContender,
  runLoad,
  Tallies,
  writeResults,
  type Contender,
  type RoundLoad,
} from './support.js'
import { printWriteBackOverAdmission, WRITE_BACK_ROWS, writeBackContenders, type WriteBackBenchContext } from './write-back.js'
import { LEASE_ROWS, leaseContenders, printLeaseUnderAdmission } from './lease.js'
import { printAutoRows } from './auto.js'
import { IDEMPOTENT_MERGE_FLOOR, keyWriteFloor, printSyncFloor, printSyncSummary } from './sync-rows.js'

const CALLERS = 256
const KEYS = 10_000
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5)
const ROUND_MS = Number(process.env.BENCH_ROUND_MS ?? 1500)
// A cap on calls per measurement so one round stays bounded on a fast machine too.
const MAX_OPS_PER_ROUND = 2_000_000
// High enough that every contender admits every request: all of them do the same writing work.
const LIMIT = 1_000_000_000
const PERIOD_S = 3600

const FLOODGATE_ALGORITHMS: AlgorithmName[] = ['gcra', 'fixed-window', 'token-bucket', 'sliding-window']

/**
 * Every request admitted, on state that lives between a key's visits, as rate-limiter-flexible's
 * hour-long counters do. A bucket at LIMIT per hour owes each unit back within microseconds, so its
 * state would lapse between visits and every request would write a key that expires at once: buckets
 * get a modest rate and a burst of LIMIT instead.
 */
export function benchPolicy(algorithm: AlgorithmName): PolicyOptions {
  if (algorithm === 'gcra' || algorithm === 'token-bucket') return { algorithm, limit: 1_000, burst: LIMIT, period: `${PERIOD_S}s` }
  return { algorithm, limit: LIMIT, period: `${PERIOD_S}s` }
}

/** The client options every contender gets; the same for all, so the comparison is fair. */
function clientOptions(server: RedisProcess): RedisOptions {
  return { host: server.host, port: server.port, enableAutoPipelining: true, maxRetriesPerRequest: 1 }
}

const keyOf = (round: string, i: number): string => `${round}:${(i * 7919) % KEYS}`

const tallies = new Tallies()
const LOAD: RoundLoad = { callers: CALLERS, durationMs: ROUND_MS, maxOps: MAX_OPS_PER_ROUND }

async function main(): Promise<void> {
  const server = await startRedis(['--maxmemory', '0'])
  const clients: Redis[] = []
  const closers: (() => Promise<void>)[] = []
  const newClient = (): Redis => {
    const client = new Redis(clientOptions(server))
    clients.push(client)
    return client
  }
  try {
    const redisVersion = await serverVersion(newClient())
    console.log(`Floodgate Redis bench: redis-server ${redisVersion} on ${server.url}`)
    console.log(
      `${CALLERS} concurrent callers, ${formatCount(KEYS)} keys, ${ROUNDS} interleaved rounds of ${ROUND_MS}ms each; ` +
        'ioredis with enableAutoPipelining for every contender',
    )
    const writeBack: WriteBackBenchContext = {
      callers: CALLERS,
      keys: KEYS,
      roundMs: ROUND_MS,
      maxOpsPerRound: MAX_OPS_PER_ROUND,
      limit: LIMIT,
      periodS: PERIOD_S,
      newClient,
      counted: (name, op, isDenied) => tallies.counted(name, op, isDenied),
      onClose: (close) => closers.push(close),
      storeTallies: [],
    }
    const contenders = [
      ...FLOODGATE_ALGORITHMS.map((algorithm) => floodgateContender(algorithm, newClient())),
      ...writeBackContenders(writeBack),
      ...leaseContenders(writeBack),
      storeOnlyContender(newClient()),
      inProcessFloorContender(),
      rateLimiterFlexibleContender(newClient()),
      await rateLimitRedisContender(newClient()),
      incrContender(newClient()),
    ]
    const only = process.env.BENCH_ONLY === undefined ? undefined : new RegExp(process.env.BENCH_ONLY)
    const always = ['floodgate gcra', 'rate-limiter-flexible', 'raw INCR (autopipelined)']
    const chosen = contenders.filter((contender) => only === undefined || always.includes(contender.name) || only.test(contender.name))
    const admin = newClient()
    const cpu = new Map<string, CpuSample[]>()
    const results = await interleavedRounds(
      chosen.map((contender) => withCpu(contender, admin, cpu)),
      ROUNDS,
      (name, round, value) => console.log(`  round ${round + 1} ${name}: ${formatCount(value)}/s`),
    )
    const rlf = results.find((r) => r.name === 'rate-limiter-flexible')!.median
    const incr = results.find((r) => r.name === 'raw INCR (autopipelined)')!.median
    printTable(
      [
        'contender',
        'median decisions/s',
        'min',
        'max',
        'vs rlf',
        'vs INCR',
        'redis CPU',
        'redis µs/decision',
        'node CPU',
        'node µs/decision',
      ],
      results.map((r) => {
        const samples = cpu.get(r.name) ?? []
        const perDecision = (busy: (sample: CpuSample) => number) =>
          (median(samples.map((sample, i) => busy(sample) / r.samples[i])) * 1e6).toFixed(2)
        return [
          r.name,
          formatCount(r.median),
          formatCount(Math.min(...r.samples)),
          formatCount(Math.max(...r.samples)),
          ratio(r.median, rlf),
          ratio(r.median, incr),
          `${Math.round(median(samples.map((sample) => sample.redis)) * 100)}%`,
          perDecision((sample) => sample.redis),
          `${Math.round(median(samples.map((sample) => sample.node)) * 100)}%`,
          perDecision((sample) => sample.node),
        ]
      }),
      'Throughput (median of rounds; redis CPU = server CPU time / wall time: near 100% means Redis is the bottleneck;\n' +
        "node CPU = this process's CPU time (every thread: the callers, the client, the garbage collector) / wall time;\n" +
        'µs/decision = that CPU time per decision, all costs included. The machine has 2 cores for both.)',
    )
    const redisCpu = (name: string): number[] => (cpu.get(name) ?? []).map((sample) => sample.redis)
    printSyncSummary('Write-back', [...WRITE_BACK_ROWS, IN_PROCESS_FLOOR], results, redisCpu, 'floodgate gcra', 'rate-limiter-flexible')
    await printWriteBackOverAdmission(writeBack, ROUND_MS)
    printSyncSummary('Lease', [...LEASE_ROWS, IN_PROCESS_FLOOR], results, redisCpu, 'floodgate gcra', 'rate-limiter-flexible')
    await printLeaseUnderAdmission(writeBack, ROUND_MS)
    // auto beside exact, lease and a hand-routed yardstick on Zipf and lukewarm traffic (bench/auto.ts).
    if (only === undefined || only.test('auto')) await printAutoRows(server)
    printSyncFloor(
      writeBack.storeTallies,
      results,
      redisCpu,
      await keyWriteFloor(newClient(), admin, KEYS),
      await keyWriteFloor(newClient(), admin, KEYS, IDEMPOTENT_MERGE_FLOOR),
    )
    printTable(
      ['contender', 'calls', 'denied', 'failed', 'first failure'],
      results.map((r) => {
        const tally = tallies.of(r.name)
        return [r.name, formatCount(tally.calls), formatCount(tally.denied), formatCount(tally.failed), tally.firstError ?? '-']
      }),
      'Denials and failures over all rounds (all should be 0: a contender that denies or fails does less work)',
    )
    writeResults({
      redisVersion,
      callers: CALLERS,
      keys: KEYS,
      rounds: ROUNDS,
      roundMs: ROUND_MS,
      throughput: results.map(({ name, median, samples }) => ({ name, median, samples, failed: tallies.of(name).failed })),
    })
  } finally {
    for (const close of closers) await close()
    for (const client of clients) client.disconnect()
    await server.stop()
  }
}

/** CPU use during one measurement, in cores (0..1 each): the redis-server's and this process's. */
interface CpuSample {
  redis: number
  node: number
}

/** Wraps a contender so each measurement also records the redis-server's and this process's CPU use. */
function withCpu(contender: Contender, admin: Redis, samples: Map<string, CpuSample[]>): Contender {
  samples.set(contender.name, [])
  return {
    name: contender.name,
    before: contender.before,
    after: contender.after,
    async measure() {
      const redisBefore = await serverCpuSeconds(admin)
      const nodeBefore = process.cpuUsage()
      const started = performance.now()
      const value = await contender.measure()
      const wallSeconds = (performance.now() - started) / 1000
      const node = process.cpuUsage(nodeBefore)
      samples.get(contender.name)!.push({
        redis: ((await serverCpuSeconds(admin)) - redisBefore) / wallSeconds,
        node: (node.user + node.system) / 1e6 / wallSeconds,
      })
      return value
    },
  }
}

async function serverCpuSeconds(client: Redis): Promise<number> {
  const info = await client.info('cpu')
  const field = (name: string): number => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1] ?? 0)
  return field('used_cpu_user') + field('used_cpu_sys')
}

function floodgateContender(algorithm: AlgorithmName, client: Redis): Contender {
  const policy = benchPolicy(algorithm)
  // The deny cache never triggers here (nothing is denied); the timeout is generous so that a
  // busy machine measures throughput, not fallbacks.
  const limiter = new RateLimiter({ store: new RedisStore({ client }), policies: [policy], timeout: '5s' })
  return roundsContender(
    `floodgate ${algorithm}`,
    LOAD,
    tallies,
    `fg-${algorithm}`,
    (prefix, i) => limiter.limit(keyOf(prefix, i)),
    (decision) => {
      // A decision the store did not make (timeout, store error) is the limiter's fallback.
      if (decision.source !== 'store') throw new Error(`decision came from ${decision.source}`)
      return !decision.allowed
    },
  )
}

/** A diagnostic row: RedisStore.evaluate without the RateLimiter, to split the cost between them. */
function storeOnlyContender(client: Redis): Contender {
  const store = new RedisStore({ client })
  const policies = createPolicies([benchPolicy('gcra')])
  return roundsContender(
    'floodgate gcra, RedisStore alone',
    LOAD,
    tallies,
    'store',
    (prefix, i) => store.evaluate([{ key: keyOf(prefix, i), policies, cost: 1 }]),
    ([response]) => !response.allowed,
  )
}

const IN_PROCESS_FLOOR = 'floor: in-process answer, no store, 10k keys'

/**
 * A diagnostic floor for the sync rows, not a product path: an answer made in this process with no
 * limiting and no store (a Map read over 10k keys built per request, one clock reading, a decision
 * as complete as Floodgate's, an async call) under the same load. A row that answers in-process
 * cannot beat it, so its ratio to the exact row bounds the "vs exact" any sync mode can show in the
 * same run: the exact row is bound by Redis, this one by Node, and the ratio moves with the two.
 */
function inProcessFloorContender(): Contender {
  const counts = new Map<string, { count: number }>()
  for (let i = 0; i < KEYS; i++) counts.set(`floor:${i}`, { count: 0 })
  const answer = async (key: string) => {
    const entry = counts.get(key)!
    return decisionLiteral(++entry.count, Date.now())
  }
  return roundsContender(
    IN_PROCESS_FLOOR,
    LOAD,
    tallies,
    'floor',
    (_, i) => answer(`floor:${(i * 7919) % KEYS}`),
    (decision) => !decision.allowed,
  )
}

function rateLimiterFlexibleContender(client: Redis): Contender {
  // Made once and kept, as every other contender and as an application keeps it.
  const limiter = new RateLimiterRedis({ storeClient: client, points: LIMIT, duration: PERIOD_S, keyPrefix: 'rlf' })
  return {
    name: 'rate-limiter-flexible',
    async measure() {
      const result = await runLoad({
        ...LOAD,
        // consume() rejects with a RateLimiterRes on a denial and with an Error on a failure.
        ...tallies.counted(
          'rate-limiter-flexible',
          (i) => limiter.consume(keyOf('k', i)),
          () => false,
          (reason) => reason instanceof RateLimiterRes,
        ),
      })
      return result.perSecond
    },
  }
}

async function rateLimitRedisContender(client: Redis): Promise<Contender> {
  const store = new RateLimitRedisStore({
    sendCommand: (command: string, ...args: string[]) => client.call(command, ...args) as Promise<number>,
    prefix: 'rlr:',
  })
  await store.init({ windowMs: PERIOD_S * 1000 } as Parameters<RateLimitRedisStore['init']>[0])
  return roundsContender(
    'rate-limit-redis (express-rate-limit)',
    LOAD,
    tallies,
    'rlr',
    (prefix, i) => store.increment(keyOf(prefix, i)),
    ({ totalHits }) => totalHits > LIMIT,
  )
}

function incrContender(client: Redis): Contender {
  return roundsContender(
    'raw INCR (autopipelined)',
    LOAD,
    tallies,
    'incr',
    (prefix, i) => client.incr(keyOf(prefix, i)),
    (count) => count > LIMIT,
  )
}

async function serverVersion(client: Redis): Promise<string> {
  return /redis_version:(\S+)/.exec(await client.info('server'))?.[1] ?? '?'
}

main().catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
