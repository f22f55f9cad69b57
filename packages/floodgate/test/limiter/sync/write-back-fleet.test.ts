// Write-back's two bounds (docs/sync.md), measured on a fleet of four processes sharing one key on a
// real redis-server with real timers: what a fleet admits when its demand comes one process after
// another (under-admission), and when all four start together (over-admission, in terms known in
// advance). Assertions are on counts against the formulas; the timers only shape the demand.

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { fileURLToPath } from 'node:url'
import { createPolicies } from '../../../src/core/policy.js'
import { RedisStore } from '../../../src/redis.js'
import { startRedis, type RedisProcess } from '../../support/redis-server.js'
import { Workers } from '../../support/workers.js'
import type { FleetConfig, FleetReport } from './write-back-fleet-worker.js'

const WORKER = fileURLToPath(new URL('./write-back-fleet-worker.ts', import.meta.url))
const N = 4
const LIMIT = 2_000
const FLUSH_MS = 100
// A day's window: one budget for the whole run, wherever the wall clock stands.
const POLICY = { algorithm: 'fixed-window', limit: LIMIT, period: '1d', sync: 'write-back', flushMs: FLUSH_MS } as const

let redis: RedisProcess
const workers = new Workers(WORKER)

before(async () => {
  redis = await startRedis()
})

after(async () => {
  workers.killAll()
  await redis?.stop()
})

/**
 * The under-admission formula (docs/sync.md): processes one after another, each alone on the key,
 * process p asking for d units and taking m answers' shares while its demand lasts. Each answer hands
 * it floor(R / N) of the R it shows left: about min(d, R·(1 − (1 − 1/N)^m)) in all.
 */
function underBound(demands: readonly number[], answers: number): number {
  let left = LIMIT
  for (const demand of demands) {
    let got = 0
    for (let answer = 0; answer < answers && got < demand; answer++) {
      const take = Math.min(Math.floor(left / N), demand - got)
      got += take
      left -= take
    }
  }
  return LIMIT - left
}

/** The over-admission bound in terms known in advance, whatever the timing (docs/sync.md): L·(2N − 1)/N + N·c. */
const OVER_BOUND = (LIMIT * (2 * N - 1)) / N + N * 1
/** What N instances starting together from one empty answer admit when each takes one share after it: L·(1 + (N − 1)/(2N)). */
const ONE_ROUND = LIMIT * (1 + (N - 1) / (2 * N))

async function storedUnits(key: string): Promise<number> {
  const store = new RedisStore({ url: redis.url })
  try {
    const [answer] = await store.merge([{ key, policies: createPolicies([POLICY]), units: 0 }])
    return answer.records[0].state![1]
  } finally {
    await store.close()
  }
}

async function fleet(key: string, config: Omit<FleetConfig, 'url' | 'key' | 'policy' | 'instances'>): Promise<FleetReport[]> {
  const reports = await workers.run<FleetConfig, FleetReport>(N, { url: redis.url, key, policy: POLICY, instances: N, ...config })
  return reports.sort((a, b) => a.place - b.place)
}

const total = (reports: FleetReport[]): number => reports.reduce((sum, report) => sum + report.admitted, 0)
const describe = (reports: FleetReport[]): string =>
  `per process ${reports.map((r) => r.admitted).join('+')}; store calls ${reports.map((r) => r.stats.calls).join('+')}; ` +
  `oldest answers ${reports.map((r) => Math.round(r.stats.oldestAnswerMs)).join('+')} ms`

test('one after another, 600 each over 2 flush intervals: the fleet admits ≥ 90% of the limit', async (t) => {
  const key = 'fleet-two-intervals'
  // 20 batches a tenth of an interval apart, each standing for its tenth: 2 flush intervals of demand.
  const reports = await fleet(key, { inTurn: true, demand: 600, steps: 20, stepMs: FLUSH_MS / 10 })
  const admitted = total(reports)
  // The formula with the answers sure to come in 2 intervals (the read and 4 early refreshes); ticks
  // alone (2 answers: 1746, 87%) are what write-back had before early refreshes, and it got 85–87%.
  const floor = underBound([600, 600, 600, 600], 5)
  t.diagnostic(`admitted ${admitted} of ${LIMIT}; the formula with 5 answers each: ${floor}; ${describe(reports)}`)
  assert.ok(admitted >= 0.9 * LIMIT, `admitted ${admitted} < 90% of ${LIMIT}`)
  assert.ok(admitted >= floor, `admitted ${admitted} < the formula with 5 answers, ${floor}`)
  assert.ok(admitted <= LIMIT + N, `one after another the fleet never goes past the limit (+N·c): ${admitted}`)
  assert.equal(await storedUnits(key), admitted, 'the store holds every admitted unit once')
})

test('one after another, each a burst shorter than a flush interval: at least the formula with one answer', async (t) => {
  const key = 'fleet-short'
  // 2000 each in 3 batches over 0.4 flush intervals: demand outlasts any share.
  const reports = await fleet(key, { inTurn: true, demand: LIMIT, steps: 3, stepMs: FLUSH_MS / 5 })
  const admitted = total(reports)
  const oneAnswer = underBound([LIMIT, LIMIT, LIMIT, LIMIT], 1)
  t.diagnostic(`admitted ${admitted} of ${LIMIT}; the formula with one answer each: ${oneAnswer}; ${describe(reports)}`)
  assert.ok(admitted >= oneAnswer, `admitted ${admitted} < ${oneAnswer}`)
  assert.ok(admitted <= LIMIT + N, `one after another the fleet never goes past the limit (+N·c): ${admitted}`)
  assert.equal(await storedUnits(key), admitted, 'the store holds every admitted unit once')
})

test('all four together, each asking for the whole limit over 2 intervals: at most L·(2N−1)/N + N·c', async (t) => {
  const key = 'fleet-together'
  const reports = await fleet(key, { inTurn: false, demand: LIMIT, steps: 20, stepMs: FLUSH_MS / 10 })
  const admitted = total(reports)
  // One round of shares is what a quiet machine shows (2750); an instance that refreshes early takes
  // more shares while the others still hold theirs (2775 and 2800 seen beside busy loops, every
  // answer under flushMs old), so that figure is reported, and the bound asserted holds whatever
  // the timing (docs/sync.md).
  t.diagnostic(`admitted ${admitted} of ${LIMIT}; one round of shares ${ONE_ROUND}; bound ${OVER_BOUND}; ${describe(reports)}`)
  assert.ok(admitted >= LIMIT, `demand was four times the limit: at least the limit, got ${admitted}`)
  assert.ok(admitted <= OVER_BOUND, `admitted ${admitted} > ${OVER_BOUND}`)
  assert.equal(await storedUnits(key), admitted, 'the store holds every admitted unit once')
})
