// The `auto` rows of `npm run bench:redis` (also alone: `node --conditions=floodgate-source --import
// tsx bench/auto.ts`): exact, lease, auto and a hand-routed yardstick (leases for the HAND_HOT
// hottest keys, exact for the rest) side by side on two shapes of traffic, on a private
// redis-server: Zipf(1.1) over 100,000 keys (closed loop, as fast as it goes), and uniform lukewarm
// keys (10,000 keys, ~20k decisions/s offered). Decisions/s and Redis CPU µs per decision, with
// ratios to exact. Steady state: each measurement follows WARM_MS of the same load, outside it,
// and ends, inside it, with every lease given back (their cost is the contender's own). Alone, it
// first prints what following heat costs Node per decision (printAutoPathCost).

import { Redis } from 'ioredis'
import { RateLimiter, type Decision } from '../packages/floodgate/src/index.js'
import { RedisStore } from '../packages/floodgate/src/redis.js'
import { createPolicy, type PolicyOptions } from '../packages/floodgate/src/core/policy.js'
import { AutoSync } from '../packages/floodgate/src/limiter/sync/auto-sync.js'
import type { LeaseSync } from '../packages/floodgate/src/limiter/sync/lease-sync.js'
import type { LeaseStore } from '../packages/floodgate/src/stores/store.js'
import { startRedis, type RedisProcess } from '../packages/floodgate/test/support/redis-server.js'
import { formatCount, interleavedRounds, median, printTable, ratio, runLoad, type Contender } from './support.js'

const CALLERS = 256
const ROUNDS = Number(process.env.BENCH_AUTO_ROUNDS ?? 3)
const ROUND_MS = Number(process.env.BENCH_AUTO_ROUND_MS ?? 1500)
const WARM_MS = Number(process.env.BENCH_AUTO_WARM_MS ?? 1500)
const ZIPF_KEYS = 100_000
const ZIPF_S = 1.1
const LUKEWARM_KEYS = 10_000
const LUKEWARM_RATE = 20_000 // decisions/s offered
const HAND_HOT = 2_000
// Every request admitted: fixed-window, far from its limit, state live between a key's visits.
const POLICY: PolicyOptions = { algorithm: 'fixed-window', limit: 1_000_000_000, period: '3600s' }

/** A traffic shape: the rank (0 = hottest) of the i-th request's key, and the pace it is offered at. */
interface Shape {
  name: string
  rank: (i: number) => number
  /** Decisions/s offered (open loop), or undefined: as fast as the callers go. */
  rate?: number
}

// 2^20 ranks drawn once from Zipf(s) over n keys (inverse CDF), replayed in order by every contender.
function zipfRanks(n: number, s: number): Int32Array {
  const cdf = new Float64Array(n)
  let sum = 0
  for (let r = 0; r < n; r++) cdf[r] = sum += 1 / (r + 1) ** s
  const ranks = new Int32Array(1 << 20)
  let seed = 0x2545f491
  for (let i = 0; i < ranks.length; i++) {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0
    const u = (seed / 2 ** 32) * sum
    let lo = 0
    let hi = n - 1
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (cdf[mid] < u) lo = mid + 1
      else hi = mid
    }
    ranks[i] = lo
  }
  return ranks
}

function shapes(): Shape[] {
  const zipf = zipfRanks(ZIPF_KEYS, ZIPF_S)
  return [
    { name: `Zipf(${ZIPF_S}) over ${formatCount(ZIPF_KEYS)} keys`, rank: (i) => zipf[i & (zipf.length - 1)] },
    {
      name: `uniform lukewarm, ${formatCount(LUKEWARM_KEYS)} keys at ~${formatCount(LUKEWARM_RATE)}/s`,
      rank: (i) => (i * 7919) % LUKEWARM_KEYS,
      rate: LUKEWARM_RATE,
    },
  ]
}

type Route = (rank: number) => RateLimiter

interface Row {
  contender: Contender
  decisions: number[]
  redisUs: number[]
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

async function redisCpuSeconds(admin: Redis): Promise<number> {
  const info = await admin.info('cpu')
  const field = (name: string): number => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1] ?? 0)
  return field('used_cpu_user') + field('used_cpu_sys')
}

function denied(decision: Decision): boolean {
  // A decision the failure mode made would flatter the row.
  if (decision.source !== 'lease' && decision.source !== 'store') throw new Error(`decision came from ${decision.source}`)
  return !decision.allowed
}

/** Runs the auto rows on `server` (a private redis-server) and prints one table per shape. */
export async function printAutoRows(server: RedisProcess): Promise<void> {
  const clients: Redis[] = []
  const limiters: RateLimiter[] = []
  const newLimiter = (sync: PolicyOptions['sync']): RateLimiter => {
    const client = new Redis({ host: server.host, port: server.port, enableAutoPipelining: true, maxRetriesPerRequest: 1 })
    clients.push(client)
    // The timeout is generous so that a busy machine measures throughput, not fallbacks.
    const limiter = new RateLimiter({ store: new RedisStore({ client }), policies: [{ ...POLICY, sync }], timeout: '5s' })
    limiters.push(limiter)
    return limiter
  }
  const admin = new Redis({ host: server.host, port: server.port })
  clients.push(admin)
  try {
    for (const shape of shapes()) {
      const exact = newLimiter('always')
      const lease = newLimiter('lease')
      const auto = newLimiter('auto')
      const handLease = newLimiter('lease')
      const handExact = newLimiter('always')
      const routes: [string, Route][] = [
        ['exact (always)', () => exact],
        ['lease', () => lease],
        ['auto', () => auto],
        [`hand-routed: lease for ${formatCount(HAND_HOT)} hottest`, (rank) => (rank < HAND_HOT ? handLease : handExact)],
      ]
      const rows = routes.map(([name, route], n) => row(name, `a${n}-${shape.name.length}`, route, shape, admin))
      await interleavedRounds(
        rows.map((r) => r.contender),
        ROUNDS,
      )
      const base = rows[0]
      const baseRate = median(base.decisions)
      const baseUs = median(base.redisUs)
      printTable(
        ['contender', 'median decisions/s', 'vs exact', 'redis µs/decision', 'vs exact'],
        rows.map((r) => [
          r.contender.name,
          formatCount(median(r.decisions)),
          ratio(median(r.decisions), baseRate),
          median(r.redisUs).toFixed(2),
          ratio(median(r.redisUs), baseUs),
        ]),
        `auto vs exact, ${shape.name}: fixed-window, ${CALLERS} callers, ${ROUNDS} interleaved rounds of ${ROUND_MS} ms ` +
          `after ${WARM_MS} ms warm-up; key strings built per request`,
      )
    }
  } finally {
    for (const limiter of limiters) await limiter.close()
    for (const client of clients) client.disconnect()
  }
}

function row(name: string, prefix: string, route: Route, shape: Shape, admin: Redis): Row {
  let offset = 0
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
        return denied(await route(rank).limit(`${prefix}:${rank}`))
      },
    })
    offset += result.ops
    return result.ops
  }
  const result: Row = { decisions: [], redisUs: [], contender: { name, measure: async () => 0 } }
  result.contender = {
    name,
    before: async () => {
      await load(WARM_MS)
    },
    measure: async () => {
      const cpuBefore = await redisCpuSeconds(admin)
      const started = performance.now()
      const ops = await load(ROUND_MS)
      // Every lease given back inside the measurement: its cost is this contender's.
      await Promise.all([route(0).flush(), route(HAND_HOT).flush()])
      const seconds = (performance.now() - started) / 1000
      const cpu = (await redisCpuSeconds(admin)) - cpuBefore
      result.decisions.push(ops / seconds)
      result.redisUs.push((cpu * 1e6) / ops)
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
  const leases = { tryLocal: () => void hot++, drop: () => {} } as unknown as LeaseSync
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

if (import.meta.url === `file://${process.argv[1]}`) {
  printAutoPathCost()
  const server = await startRedis(['--maxmemory', '0'])
  try {
    await printAutoRows(server)
  } finally {
    await server.stop()
  }
}
