// The `auto` rows of `npm run bench:redis` (also alone: `node --conditions=floodgate-source --import
// tsx bench/auto.ts`): exact, lease, auto, a hand-routed yardstick (leases for the HAND_HOT hottest
// keys, exact for the rest) and the floor (the load alone: bench/auto-floor.ts) side by side on two
// shapes of traffic, on a private redis-server: Zipf(1.1) over 100,000 keys (closed loop, as fast
// as it goes; fixed-window), and uniform lukewarm keys (10,000 keys, ~20k decisions/s offered; one
// table per algorithm, without the yardstick or the floor). Decisions/s, Redis CPU µs per decision
// with ratios to exact, and the share of decisions answered in-process. Steady state: each
// measurement follows a warm-up of the same load, outside it, and ends, inside it, with every lease
// given back (their cost is the contender's own). The warm-up is three of auto's heat windows
// (BENCH_AUTO_WARM_MS overrides it): a key's rate is read over one, and between its rounds a
// contender idles while the others run, so its keys cool.
// Alone, it first prints what following heat costs Node per decision (printAutoPathCost), and with
// BENCH_AUTO_HEAT=1 what auto leases at each pace (printHeatShares).
// BENCH_AUTO_SHAPES (zipf, uniform, both by default) and BENCH_AUTO_ALGORITHMS (comma-separated, the
// uniform tables') narrow a run.

import { Redis } from 'ioredis'
import { RateLimiter, type Decision } from '../packages/floodgate/src/index.js'
import { RedisStore } from '../packages/floodgate/src/redis.js'
import { createPolicy, type AlgorithmName, type PolicyOptions } from '../packages/floodgate/src/core/policy.js'
import { AutoSync, heatThresholds } from '../packages/floodgate/src/limiter/sync/auto-sync.js'
import type { LeaseSync } from '../packages/floodgate/src/limiter/sync/lease-sync.js'
import type { LeaseStore } from '../packages/floodgate/src/stores/store.js'
import { startRedis, type RedisProcess } from '../packages/floodgate/test/support/redis-server.js'
import { zipfRanks } from '../packages/floodgate/test/support/zipf.js'
import { replayHeat, type HeatReplay } from '../packages/floodgate/test/support/heat-replay.js'
import { floorLimiter } from './auto-floor.js'
import { formatCount, interleavedRounds, median, printTable, ratio, runLoad, type Contender } from './support.js'

const CALLERS = 256
const ROUNDS = Number(process.env.BENCH_AUTO_ROUNDS ?? 3)
const ROUND_MS = Number(process.env.BENCH_AUTO_ROUND_MS ?? 1500)
const WARM_WINDOWS = 3
const ZIPF_KEYS = 100_000
const ZIPF_S = 1.1
const LUKEWARM_KEYS = 10_000
const LUKEWARM_RATE = 20_000 // decisions/s offered
const HAND_HOT = 2_000
// Every request admitted: fixed-window, far from its limit, state live between a key's visits.
const POLICY: PolicyOptions = { algorithm: 'fixed-window', limit: 1_000_000_000, period: '3600s' }
const ALGORITHMS = (process.env.BENCH_AUTO_ALGORITHMS ?? 'fixed-window,sliding-window,token-bucket,gcra').split(',') as AlgorithmName[]
const SHAPES = (process.env.BENCH_AUTO_SHAPES ?? 'zipf,uniform').split(',')

/** Every request admitted, state live between a key's visits: a bucket refills slowly but never runs dry. */
function policyOf(algorithm: AlgorithmName): PolicyOptions {
  if (algorithm === 'token-bucket' || algorithm === 'gcra') return { algorithm, limit: 1_000, burst: 1e9, period: '3600s' }
  return { ...POLICY, algorithm }
}

/** A traffic shape: the rank (0 = hottest) of the i-th request's key, and the pace it is offered at. */
interface Shape {
  name: string
  rank: (i: number) => number
  /** Decisions/s offered (open loop), or undefined: as fast as the callers go. */
  rate?: number
  algorithm: AlgorithmName
  /** With the hand-routed yardstick (it needs a skew to route by). */
  yardstick: boolean
}

function shapes(): Shape[] {
  const list: Shape[] = []
  if (SHAPES.includes('zipf')) {
    const zipf = zipfRanks(ZIPF_KEYS, ZIPF_S)
    const rank = (i: number) => zipf[i & (zipf.length - 1)]
    list.push({ name: `Zipf(${ZIPF_S}) over ${formatCount(ZIPF_KEYS)} keys`, rank, algorithm: 'fixed-window', yardstick: true })
  }
  if (SHAPES.includes('uniform')) {
    for (const algorithm of ALGORITHMS) {
      list.push({
        name: `uniform lukewarm, ${formatCount(LUKEWARM_KEYS)} keys at ~${formatCount(LUKEWARM_RATE)}/s`,
        rank: (i) => (i * 7919) % LUKEWARM_KEYS,
        rate: LUKEWARM_RATE,
        algorithm,
        yardstick: false,
      })
    }
  }
  return list
}

/** The limiter that decides a request's key, given its rank and the key string built for the request. */
type Route = (rank: number, key: string) => RateLimiter

interface Row {
  contender: Contender
  decisions: number[]
  redisUs: number[]
  /** Per measurement, the share of decisions answered in-process (from a lease). */
  local: number[]
  /** Per measurement, leases taken per 1,000 decisions, and keys on leases at its end. */
  leasesPerK: number[]
  hotKeys: number[]
  /** Per measurement, this process's CPU µs per decision (user + system: the limiter, the client, the load). */
  nodeUs: number[]
}

// What a contender's limiters have taken in leases, and how many keys `auto` keeps on them.
function leaseCounts(limiters: readonly RateLimiter[]): { acquired: number; hot: number } {
  let acquired = 0
  let hot = 0
  for (const limiter of limiters) {
    const leases = limiter.syncState().leases
    acquired += leases?.acquired ?? 0
    hot += leases?.autoOnLeases ?? 0
  }
  return { acquired, hot }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

async function redisCpuSeconds(admin: Redis): Promise<number> {
  const info = await admin.info('cpu')
  const field = (name: string): number => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1] ?? 0)
  return field('used_cpu_user') + field('used_cpu_sys')
}

// Counts in-process decisions; throws on a denial or a fallback's decision (either would flatter the row).
function counted(decision: Decision, tally: { local: number }): void {
  if (decision.source === 'lease') tally.local++
  else if (decision.source !== 'store') throw new Error(`decision came from ${decision.source}`)
  if (!decision.allowed) throw new Error('a decision was denied: the policy must admit every request')
}

/** Runs the auto rows on `server` (a private redis-server) and prints one table per shape. */
export async function printAutoRows(server: RedisProcess): Promise<void> {
  const clients: Redis[] = []
  const limiters: RateLimiter[] = []
  const newLimiter = (policy: PolicyOptions, sync: PolicyOptions['sync']): RateLimiter => {
    const client = new Redis({ host: server.host, port: server.port, enableAutoPipelining: true, maxRetriesPerRequest: 1 })
    clients.push(client)
    // The timeout is generous so that a busy machine measures throughput, not fallbacks.
    const limiter = new RateLimiter({ store: new RedisStore({ client }), policies: [{ ...policy, sync }], timeout: '5s' })
    limiters.push(limiter)
    return limiter
  }
  const admin = new Redis({ host: server.host, port: server.port })
  clients.push(admin)
  try {
    for (const shape of shapes()) {
      const policy = policyOf(shape.algorithm)
      const exact = newLimiter(policy, 'always')
      const lease = newLimiter(policy, 'lease')
      const hotRate = process.env.BENCH_AUTO_HOT_RATE
      const autoPolicy = hotRate === undefined ? policy : { ...policy, hotRate: Number(hotRate) }
      const auto = newLimiter(autoPolicy, 'auto')
      const warmMs = Number(
        process.env.BENCH_AUTO_WARM_MS ?? WARM_WINDOWS * heatThresholds([createPolicy({ ...autoPolicy, sync: 'auto' })]).windowMs,
      )
      // Each contender's route, made for the key prefix of its row.
      const routes: [string, (prefix: string) => Route][] = [
        ['exact (always)', () => () => exact],
        ['lease', () => () => lease],
        ['auto', () => () => auto],
      ]
      if (shape.yardstick) {
        const handLease = newLimiter(policy, 'lease')
        const handExact = newLimiter(policy, 'always')
        // Routed as a deployment told its hot keys would route: by looking the request's key string
        // up in a set of them (routing by the rank, which no server has, would spare the yardstick
        // the lookup of each fresh key string that auto pays).
        const hand = (prefix: string): Route => {
          const hot = new Set(Array.from({ length: HAND_HOT }, (_, rank) => `${prefix}:${rank}`))
          return (_rank, key) => (hot.has(key) ? handLease : handExact)
        }
        routes.push([`hand-routed: lease for ${formatCount(HAND_HOT)} hottest`, hand])
        const floor = floorLimiter()
        routes.push(['floor: the load alone (a Map count)', () => () => floor])
      }
      // BENCH_AUTO_ONLY (a contender's name, e.g. for a CPU profile) runs exact and that one.
      const only = process.env.BENCH_AUTO_ONLY
      if (only !== undefined) routes.splice(1, routes.length, ...routes.filter(([name], n) => n > 0 && name.startsWith(only)))
      const rows = routes.map(([name, routeFor], n) => {
        const prefix = `a${n}-${shape.algorithm}-${shape.name.length}`
        return row(name, prefix, routeFor(prefix), shape, admin, warmMs)
      })
      await interleavedRounds(
        rows.map((r) => r.contender),
        ROUNDS,
      )
      const base = rows[0]
      const baseRate = median(base.decisions)
      const baseUs = median(base.redisUs)
      printTable(
        [
          'contender',
          'median decisions/s',
          'vs exact',
          'redis µs/decision',
          'vs exact',
          'in-process',
          'node µs/decision',
          'leases/1k',
          'auto hot keys',
        ],
        rows.map((r) => [
          r.contender.name,
          formatCount(median(r.decisions)),
          ratio(median(r.decisions), baseRate),
          median(r.redisUs).toFixed(2),
          ratio(median(r.redisUs), baseUs),
          `${(100 * median(r.local)).toFixed(0)}%`,
          median(r.nodeUs).toFixed(2),
          median(r.leasesPerK).toFixed(1),
          formatCount(median(r.hotKeys)),
        ]),
        `auto vs exact, ${shape.name}: ${shape.algorithm}, ${CALLERS} callers, ${ROUNDS} interleaved rounds of ${ROUND_MS} ms ` +
          `after ${formatCount(warmMs)} ms warm-up; key strings built per request`,
      )
    }
  } finally {
    for (const limiter of limiters) await limiter.close()
    for (const client of clients) client.disconnect()
  }
}

function row(name: string, prefix: string, route: Route, shape: Shape, admin: Redis, warmMs: number): Row {
  let offset = 0
  const tally = { local: 0 }
  const load = async (durationMs: number): Promise<number> => {
    const from = offset
    const started = performance.now()
    const result = await runLoad({
      callers: CALLERS,
      durationMs,
      maxOps: 50_000_000,
      op: async (i) => {
        const n = from + i
        if (shape.rate !== undefined) {
          const due = started + (i * 1000) / shape.rate
          const wait = due - performance.now()
          if (wait > 0) await sleep(wait)
        }
        const rank = shape.rank(n)
        const key = `${prefix}:${rank}`
        counted(await route(rank, key).limit(key), tally)
      },
    })
    offset += result.ops
    return result.ops
  }
  const result: Row = {
    decisions: [],
    redisUs: [],
    local: [],
    leasesPerK: [],
    hotKeys: [],
    nodeUs: [],
    contender: { name, measure: async () => 0 },
  }
  const hottest = route(0, `${prefix}:0`)
  const coldest = route(HAND_HOT, `${prefix}:${HAND_HOT}`)
  const limiters = [...new Set([hottest, coldest])]
  result.contender = {
    name,
    before: async () => {
      await load(warmMs)
    },
    measure: async () => {
      const cpuBefore = await redisCpuSeconds(admin)
      tally.local = 0
      const leasesBefore = leaseCounts(limiters).acquired
      const nodeBefore = process.cpuUsage()
      const started = performance.now()
      const ops = await load(ROUND_MS)
      const after = leaseCounts(limiters)
      const node = process.cpuUsage(nodeBefore)
      // Every lease given back inside the measurement: its cost is this contender's.
      await Promise.all(limiters.map((limiter) => limiter.flush()))
      const seconds = (performance.now() - started) / 1000
      const cpu = (await redisCpuSeconds(admin)) - cpuBefore
      result.decisions.push(ops / seconds)
      result.redisUs.push((cpu * 1e6) / ops)
      result.local.push(tally.local / ops)
      result.leasesPerK.push((1000 * (after.acquired - leasesBefore)) / ops)
      result.hotKeys.push(after.hot)
      result.nodeUs.push((node.user + node.system) / ops)
      return ops / seconds
    },
  }
  return result
}

/**
 * What following heat costs Node per decision, alone (run with bench/auto.ts, not bench:redis):
 * AutoSync.tryLocal on the Zipf ranks at 300 decisions per ms of an injected clock, with a lease
 * engine that answers nothing and a store that is never called (no I/O: only the auto path is timed).
 */
export function printAutoPathCost(): void {
  const zipf = zipfRanks(ZIPF_KEYS, ZIPF_S)
  const policies = [createPolicy({ ...POLICY, sync: 'auto' })]
  let now = 0
  let hot = 0
  const leases = {
    find: () => undefined,
    holding: () => ({ seed: () => {} }),
    tryLocal: () => void hot++,
    drop: () => {},
  } as unknown as LeaseSync
  const auto = new AutoSync({ store: {} as LeaseStore, leases, clock: () => now })
  const rows: string[][] = []
  const perRound = 2_000_000
  for (let round = 0; round < 5; round++) {
    hot = 0
    const started = performance.now()
    for (let i = round * perRound; i < (round + 1) * perRound; i++) {
      now = i / 300
      auto.tryLocal(`p:${zipf[i & (zipf.length - 1)]}`, policies, 1)
    }
    const ns = ((performance.now() - started) * 1e6) / perRound
    rows.push([String(round + 1), ns.toFixed(0), (hot / perRound).toFixed(3)])
  }
  printTable(
    ['round', 'ns/decision', 'share decided hot'],
    rows,
    `the auto path alone, Zipf(${ZIPF_S}) over ${formatCount(ZIPF_KEYS)} keys, ${formatCount(perRound)} decisions a round ` +
      '(key strings built per decision; default maxKeys)',
  )
}

// What `auto` leases at `perMs` decisions per ms with `hotRate` (test/support/heat-replay.ts).
function replayAt(keyOf: (i: number) => string, perMs: number, hotRate: number, decisions: number): HeatReplay {
  return replayHeat(keyOf, [createPolicy({ ...POLICY, sync: 'auto', hotRate })], perMs * 1000, decisions)
}

/**
 * What `auto` leases at a given pace, with no I/O (BENCH_AUTO_HEAT=1, alone): on the Zipf ranks at
 * paces from 15,000 to 300,000 decisions/s (the pace falls when the machine is loaded), beside the
 * share the 2,000 hottest keys take; and on uniform lukewarm keys (10,000 at 20,000/s in a random
 * order), where a lower hotRate flaps. Each hotRate is read over 16 decisions at it (at least 1 s); the
 * default is 12.
 */
export function printHeatShares(): void {
  const zipf = zipfRanks(ZIPF_KEYS, ZIPF_S)
  let top = 0
  for (const rank of zipf) if (rank < HAND_HOT) top++
  const rows: string[][] = []
  for (const hotRate of [12, 8, 5]) {
    for (const perMs of [15, 75, 150, 300]) {
      const zipfRow = replayAt((i) => `p:${zipf[i & (zipf.length - 1)]}`, perMs, hotRate, 3_000_000)
      rows.push([
        `Zipf at ${formatCount(perMs * 1000)}/s`,
        String(hotRate),
        zipfRow.share.toFixed(3),
        formatCount(zipfRow.hotKeys),
        zipfRow.dropsPerSecond.toFixed(0),
      ])
    }
    let seed = 12345
    const uniform = replayAt(
      () => {
        seed = (Math.imul(seed, 1103515245) + 12345) >>> 0
        return `u:${seed % LUKEWARM_KEYS}`
      },
      LUKEWARM_RATE / 1000,
      hotRate,
      1_200_000,
    )
    rows.push([
      'uniform lukewarm',
      String(hotRate),
      uniform.share.toFixed(4),
      formatCount(uniform.hotKeys),
      uniform.dropsPerSecond.toFixed(0),
    ])
  }
  printTable(
    ['traffic', 'hotRate', 'share decided hot', 'hot keys', 'dropped/s'],
    rows,
    `auto's heat replayed on an injected clock (no I/O); the ${formatCount(HAND_HOT)} hottest Zipf keys take ` +
      (top / zipf.length).toFixed(3),
  )
}

if (import.meta.url === `file://${process.argv[1]}`) {
  printAutoPathCost()
  if (process.env.BENCH_AUTO_HEAT === '1') printHeatShares()
  const server = await startRedis(['--maxmemory', '0'])
  try {
    await printAutoRows(server)
  } finally {
    await server.stop()
  }
}
