// Write-back under-admission against docs/sync.md's formula, on the memory store with simulated
// time: N instances use one key one after another, each alone while its demand lasts, and the fleet's
// shortfall (limit − admitted) is held to the formula's, `L − Σ_p min(d_p, R_p·(1 − (1 − 1/N)^m))`.

import { RateLimiter } from '../../packages/floodgate/src/index.js'
import type { PolicyOptions } from '../../packages/floodgate/src/core/policy.js'
import { MemoryStore } from '../../packages/floodgate/src/stores/memory/memory-store.js'
import type { BoundRow } from './bounds.js'
import type { RunSize } from './setup.js'
import { DistantStore, SimTime } from './write-back-bound.js'

const turn = () => new Promise<void>((resolve) => setImmediate(resolve))

interface Shape {
  readonly name: string
  /** Units each instance asks for, spread evenly over `steps` batches `stepMs` apart. */
  readonly demand: number
  readonly steps: number
  /** In flush intervals. */
  readonly stepIntervals: number
  /** The answers each instance is sure to get while its demand lasts (docs/sync.md, under-admission). */
  readonly answers: number
}

/**
 * What processes one after another admit at least (docs/sync.md): each of its `answers` hands a
 * process floor(R / N) of the R its answer shows left, until it has its demand `d`; so it takes about
 * min(d, R·(1 − (1 − 1/N)^m)), less a unit per answer for the rounding.
 */
export function underAdmissionFloor(limit: number, instances: number, demands: readonly number[], answers: number): number {
  let left = limit
  for (const demand of demands) {
    let got = 0
    for (let answer = 0; answer < answers && got < demand; answer++) {
      const take = Math.min(Math.floor(left / instances), demand - got)
      got += take
      left -= take
    }
  }
  return limit - left
}

async function run(instances: number, flushMs: number, rttMs: number, limit: number, shape: Shape): Promise<BoundRow> {
  const time = new SimTime()
  const store = new DistantStore(new MemoryStore({ clock: time.clock }), time, rttMs)
  const policy: PolicyOptions = { name: 'wb', algorithm: 'fixed-window', limit, period: '1h', sync: 'write-back', flushMs }
  const stepMs = Math.round(shape.stepIntervals * flushMs)
  let admitted = 0
  for (let p = 0; p < instances; p++) {
    const limiter = new RateLimiter({
      store,
      policies: [policy],
      instances,
      clock: time.clock,
      timers: { now: time.clock, setTimeout: time.setTimeout },
      timeout: '1h',
      denyCache: false,
    })
    let pending = 0
    let asked = 0
    for (let ms = 0; ms <= (shape.steps - 1) * stepMs || pending > 0; ms++) {
      if (ms % stepMs === 0 && ms / stepMs < shape.steps) {
        const batch = Math.round(((ms / stepMs + 1) * shape.demand) / shape.steps) - asked
        asked += batch
        for (let i = 0; i < batch; i++) {
          pending++
          void limiter.limit('key').then((decision) => {
            pending--
            if (decision.allowed) admitted++
          })
        }
      }
      await turn()
      time.advance(1)
      await turn()
    }
    // The next instance starts once this one's units are all in the store.
    let closed = false
    const closing = limiter.close().then(() => (closed = true))
    while (!closed) {
      await turn()
      time.advance(1)
    }
    await closing
  }
  const floor = underAdmissionFloor(limit, instances, Array<number>(instances).fill(shape.demand), shape.answers)
  return {
    setup: `in turn, N ${instances}, ${shape.name}, flushMs ${flushMs}, RTT ${rttMs} ms, m ${shape.answers}`,
    limit,
    admitted,
    over: limit - admitted,
    bound: limit - floor,
  }
}

/** Demand shapes from one burst to two flush intervals, at 4 instances and one flush interval. */
export async function measureWriteBackUnder(size: RunSize): Promise<BoundRow[]> {
  const limit = size.quick ? 500 : 2_000
  const perProcess = Math.round(0.3 * limit)
  const shapes: Shape[] = [
    { name: `${limit} each in one burst`, demand: limit, steps: 1, stepIntervals: 1, answers: 1 },
    { name: `${limit} each over 0.4 intervals`, demand: limit, steps: 5, stepIntervals: 0.1, answers: 1 },
    { name: `${perProcess} each over 2 intervals`, demand: perProcess, steps: 20, stepIntervals: 0.1, answers: 5 },
    { name: `${limit} each over 2 intervals`, demand: limit, steps: 20, stepIntervals: 0.1, answers: 5 },
  ]
  const rows: BoundRow[] = []
  for (const shape of shapes) rows.push(await run(4, 50, 2, limit, shape))
  return rows
}
