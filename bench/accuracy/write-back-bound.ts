// Write-back over-admission against docs/sync.md's bound, on the memory store with simulated time:
// N instances share one hot key, flush every flushMs, and every store call takes a round trip, so
// each term of `N·c + r·(flushMs + 2·RTT)` is set by the run rather than by the machine's load.

import { RateLimiter } from '../../packages/floodgate/src/index.js'
import type { PolicyOptions } from '../../packages/floodgate/src/core/policy.js'
import { MemoryStore } from '../../packages/floodgate/src/stores/memory/memory-store.js'
import type { EvaluateRequest, EvaluateResponse, MergeRequest, MergeResponse, Store } from '../../packages/floodgate/src/stores/store.js'
import type { BoundRow } from './bounds.js'
import type { RunSize } from './setup.js'

/** A clock and timers that move only when the run says. */
export class SimTime {
  now = 1_700_000_000_000 - (1_700_000_000_000 % 3_600_000) + 1_000
  private due: { at: number; order: number; callback: () => void }[] = []
  private order = 0
  readonly clock = (): number => this.now
  readonly setTimeout = (callback: () => void, ms: number): object => {
    this.due.push({ at: this.now + Math.max(0, ms), order: this.order++, callback })
    return {}
  }

  /** Moves the clock by `ms`, firing each timer due on the way at its own time, in order. */
  advance(ms: number): void {
    const end = this.now + ms
    for (;;) {
      this.due.sort((a, b) => a.at - b.at || a.order - b.order)
      const next = this.due[0]
      if (next === undefined || next.at > end) break
      this.due.shift()
      this.now = next.at
      next.callback()
    }
    this.now = end
  }
}

/**
 * The memory store behind a link: a merge reaches it half a round trip after it is sent, and its answer
 * comes back half a round trip later.
 */
export class DistantStore implements Store {
  constructor(
    private readonly inner: MemoryStore,
    private readonly time: SimTime,
    private readonly rttMs: number,
  ) {}

  merge(batch: readonly MergeRequest[]): Promise<MergeResponse[]> {
    const half = this.rttMs / 2
    return new Promise((resolve, reject) => {
      this.time.setTimeout(() => {
        this.inner.merge(batch).then((answer) => this.time.setTimeout(() => resolve(answer), half), reject)
      }, half)
    })
  }

  evaluate(batch: readonly EvaluateRequest[]): Promise<EvaluateResponse[]> {
    return this.inner.evaluate(batch)
  }

  reset(key: string, policies: Parameters<Store['reset']>[1]): Promise<void> {
    return this.inner.reset(key, policies)
  }

  close(): Promise<void> {
    return Promise.resolve()
  }
}

const turn = () => new Promise<void>((resolve) => setImmediate(resolve))

interface Setup {
  readonly instances: number
  readonly flushMs: number
  readonly rttMs: number
  /** Units asked per ms over all instances (each asks its share), cost 1. */
  readonly perMs: number
  readonly limit: number
}

/** One run: demand well past the limit; admitted over the limit, and the bound. */
async function run(setup: Setup): Promise<BoundRow> {
  const { instances, flushMs, rttMs, perMs, limit } = setup
  const time = new SimTime()
  const store = new DistantStore(new MemoryStore({ clock: time.clock }), time, rttMs)
  const policy: PolicyOptions = { name: 'wb', algorithm: 'fixed-window', limit, period: '1h', sync: 'write-back', flushMs }
  const limiters = Array.from(
    { length: instances },
    () =>
      new RateLimiter({
        store,
        policies: [policy],
        instances,
        clock: time.clock,
        timers: { now: time.clock, setTimeout: time.setTimeout },
        timeout: '1h',
        denyCache: false,
      }),
  )
  let admitted = 0
  let pending = 0
  const perInstance = perMs / instances
  let owed = 0
  // Past the limit by a margin of flush intervals: every instance has heard of the limit long before the end.
  const durationMs = Math.ceil((1.5 * limit) / perMs) + 5 * flushMs
  for (let ms = 0; ms < durationMs || pending > 0; ms++) {
    if (ms < durationMs) {
      owed += perInstance
      const asks = Math.floor(owed)
      owed -= asks
      for (const limiter of limiters) {
        for (let i = 0; i < asks; i++) {
          pending++
          void limiter.limit('hot').then((decision) => {
            pending--
            if (decision.allowed) admitted++
          })
        }
      }
    }
    // First reads go out on the next turn; their answers, and the flushes, come on the simulated clock.
    await turn()
    time.advance(1)
    await turn()
  }
  // close() sends a last flush, answered on the simulated clock.
  let closed = false
  const closing = Promise.all(limiters.map((limiter) => limiter.close())).then(() => {
    closed = true
  })
  while (!closed) {
    await turn()
    time.advance(1)
  }
  await closing
  // docs/sync.md: over-admission ≤ N·c + r·(flushMs + 2·RTT), r the rate units reach the store (here all asked until the limit).
  const bound = instances * 1 + perMs * (flushMs + 2 * rttMs)
  return {
    setup: `N ${instances}, flushMs ${flushMs}, RTT ${rttMs} ms, r ${perMs}/ms`,
    limit,
    admitted,
    over: admitted - limit,
    bound,
  }
}

/** The setups the report tables: instances and flush intervals, at one demand and round trip. */
export async function measureWriteBack(size: RunSize): Promise<BoundRow[]> {
  const limit = size.quick ? 500 : 2_000
  const rows: BoundRow[] = []
  for (const instances of [2, 4]) {
    for (const flushMs of [20, 50, 100]) rows.push(await run({ instances, flushMs, rttMs: 2, perMs: 4, limit }))
  }
  return rows
}
