// `npm run bench:regions`: decisions/s of one region with region sync on (shared and split policies)
// against the same region alone, on one hot key and on 10k keys, 256 callers; then shared mode's
// over-admission and split mode's use of the limit with both regions under load, measured against
// the documented bounds. Two local redis-servers as regions, linked through a 50 ms proxy each way.
// Not a test: numbers only, printed as tables.
//
// Then split mode's hand-over when demand moves between regions (bench/regions-move.ts).
//
// Environment knobs: BENCH_ROUNDS (default 5), BENCH_ROUND_MS (default 1500 per contender and round),
// BENCH_MOVE_ROUNDS (default 3 runs per demand-move case), BENCH_PARTS (default
// `throughput,accuracy,move`: the parts to run).

import { RateLimiter } from '../packages/floodgate/src/index.js'
import { RedisStore, RegionSync } from '../packages/floodgate/src/redis.js'
import type { PolicyOptions } from '../packages/floodgate/src/core/policy.js'
import { startRedis } from '../packages/floodgate/test/support/redis-server.js'
import { startProxy } from '../packages/floodgate/test/regions/support.js'
import { formatCount, interleavedRounds, median, printTable, ratio, runLoad, type Contender } from './support.js'
import { demandMoves } from './regions-move.js'

const CALLERS = 256
const KEYS = 10_000
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5)
const ROUND_MS = Number(process.env.BENCH_ROUND_MS ?? 1500)
const MAX_OPS_PER_ROUND = 2_000_000
const LATENCY_MS = 50
const INTERVAL_MS = 100
// Throughput: high enough that everything is admitted (the same work for every contender).
const HUGE = 1_000_000_000
const PARTS = new Set((process.env.BENCH_PARTS ?? 'throughput,accuracy,move').split(','))
const MOVE_ROUNDS = Number(process.env.BENCH_MOVE_ROUNDS ?? 3)

async function main(): Promise<void> {
  const [euRedis, usRedis] = await Promise.all([startRedis(), startRedis()])
  const toUs = await startProxy(usRedis.port, LATENCY_MS)
  const toEu = await startProxy(euRedis.port, LATENCY_MS)
  const euStore = new RedisStore({ url: euRedis.url })
  // Every contender's limiter listens on the store (its breaker's quick way back).
  euStore.setMaxListeners(100)
  const usStore = new RedisStore({ url: usRedis.url })
  const eu = new RegionSync({ region: 'eu', local: euStore, peers: { us: toUs.url }, interval: INTERVAL_MS })
  const us = new RegionSync({ region: 'us', local: usStore, peers: { eu: toEu.url }, interval: INTERVAL_MS })
  const limiters: RateLimiter[] = []
  const limiterOn = (store: RedisStore | RegionSync['store'], policy: PolicyOptions): RateLimiter => {
    const limiter = new RateLimiter({ store, policies: [policy], timeout: '5s', denyCache: false })
    limiters.push(limiter)
    return limiter
  }
  try {
    // Accuracy first: the throughput rounds leave thousands of keys waiting for the peer, which would
    // make the lag (and so the bound) of the accuracy rounds that of a backlog, not of the link.
    if (PARTS.has('accuracy')) await accuracy(eu, us, limiterOn)
    if (PARTS.has('throughput')) await throughput(euStore, eu, limiterOn)
  } finally {
    for (const limiter of limiters) await limiter.close()
    await eu.close()
    await us.close()
    await euStore.close()
    await usStore.close()
    await toUs.close()
    await toEu.close()
    await Promise.all([euRedis.stop(), usRedis.stop()])
  }
}

type LimiterOn = (store: RedisStore | RegionSync['store'], policy: PolicyOptions) => RateLimiter

async function throughput(euStore: RedisStore, eu: RegionSync, limiterOn: LimiterOn): Promise<void> {
  const contenders = (workload: string, keyOf: (i: number) => string): Contender[] => {
    const variants: [string, RateLimiter][] = [
      ['fixed-window alone', limiterOn(euStore, { algorithm: 'fixed-window', limit: HUGE, period: '1h' })],
      ['fixed-window shared', limiterOn(eu.store, { algorithm: 'fixed-window', limit: HUGE, period: '1h', regions: 'shared' })],
      ['fixed-window split', limiterOn(eu.store, { algorithm: 'fixed-window', limit: HUGE, period: '1h', regions: 'split' })],
      ['gcra alone', limiterOn(euStore, { algorithm: 'gcra', limit: HUGE, period: '1h' })],
      ['gcra shared', limiterOn(eu.store, { algorithm: 'gcra', limit: HUGE, period: '1h', regions: 'shared' })],
    ]
    return variants.map(([name, limiter]) => ({
      name: `${workload}: ${name}`,
      measure: async () =>
        (
          await runLoad({
            callers: CALLERS,
            durationMs: ROUND_MS,
            maxOps: MAX_OPS_PER_ROUND,
            op: (i) => limiter.limit(keyOf(i)).then(nothing),
          })
        ).perSecond,
    }))
  }
  for (const [workload, keyOf] of [
    ['hot key', () => 'hot'],
    ['10k keys', (i: number) => `k:${(i * 7919) % KEYS}`],
  ] as const) {
    const results = await interleavedRounds(contenders(workload, keyOf), ROUNDS)
    const alone = (name: string) => results.find((r) => r.name === `${workload}: ${name.split(' ')[0]} alone`)!.median
    printTable(
      ['contender', 'decisions/s (median)', 'vs the same region alone'],
      results.map((r) => [r.name, formatCount(r.median), ratio(r.median, alone(r.name.slice(workload.length + 2)))]),
      `One region, ${CALLERS} callers, ${workload}, sync every ${INTERVAL_MS} ms to a peer ${LATENCY_MS} ms away ` +
        `(${ROUNDS} rounds of ${ROUND_MS} ms)`,
    )
  }
}

/**
 * Both regions hammer one fresh key until the limit is spent. Shared: over-admission against
 * (R − 1) × ρ × λ with ρ the faster region's admission rate and λ = interval + the largest
 * replication lag sampled (docs/regions.md). Split: admitted ≤ limit exactly, and the share used.
 */
async function accuracy(eu: RegionSync, us: RegionSync, limiterOn: LimiterOn): Promise<void> {
  const rows: string[][] = []
  for (const regions of ['shared', 'split'] as const) {
    for (const algorithm of regions === 'shared' ? (['fixed-window', 'gcra'] as const) : (['fixed-window', 'sliding-window'] as const)) {
      const limit = 50_000
      const policy: PolicyOptions = { name: `acc-${regions}-${algorithm}`, algorithm, limit, period: '1h', regions }
      const limiters = [limiterOn(eu.store, policy), limiterOn(us.store, policy)]
      const key = `accuracy:${Date.now()}`
      const admitted = [0, 0]
      const lastAdmitAt = [0, 0]
      const start = performance.now()
      // How old each region's knowledge of the other is, sampled: the replication lag λ (plus the
      // other region's interval, which its counts wait in memory for).
      const lags: number[] = []
      const sampler = setInterval(() => {
        for (const status of [eu.status(), us.status()]) if (status.peers[0].lagMs !== undefined) lags.push(status.peers[0].lagMs)
      }, 10)
      await Promise.all(
        limiters.map((limiter, r) =>
          runLoad({
            callers: CALLERS / 2,
            durationMs: 4_000,
            maxOps: 10 * limit,
            op: async () => {
              if ((await limiter.limit(key)).allowed) {
                admitted[r]++
                lastAdmitAt[r] = performance.now()
              }
            },
          }),
        ),
      )
      clearInterval(sampler)
      const total = admitted[0] + admitted[1]
      const rates = admitted.map((n, r) => (n * 1000) / Math.max(1, lastAdmitAt[r] - start))
      const lambdaMs = INTERVAL_MS + Math.max(...lags, 0)
      const bound = regions === 'shared' ? Math.ceil((Math.max(...rates) * lambdaMs) / 1000) : 0
      rows.push([
        `${regions} ${algorithm}`,
        formatCount(limit),
        formatCount(total),
        `${((100 * total) / limit).toFixed(1)}%`,
        formatCount(total - limit),
        formatCount(bound),
        `${formatCount(median(lags))} / ${formatCount(Math.max(...lags, 0))}`,
        formatCount(Math.max(...rates)),
      ])
    }
  }
  printTable(
    ['policy', 'limit', 'admitted', 'of limit', 'over', 'bound', 'lag ms (median / max)', 'ρ max /s'],
    rows,
    `Two regions under load at once (${CALLERS / 2} callers each, one key, 4 s), ${LATENCY_MS} ms each way, ` +
      `sync every ${INTERVAL_MS} ms; ` +
      'shared bound = (R − 1) × ρ × λ, λ = interval + the largest lag sampled; split bound = 0',
  )
}

function nothing(): void {}

if (PARTS.has('accuracy') || PARTS.has('throughput')) await main()
if (PARTS.has('move')) await demandMoves(MOVE_ROUNDS)
