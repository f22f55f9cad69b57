// Bounds store calls in time, so a slow or vanished store turns into the limiter's failure mode.

import { FloodgateError } from '../core/errors.js'

interface Pending {
  readonly deadline: number
  readonly reject: (error: unknown) => void
  settled: boolean
}

/**
 * Times out calls that all share one limit, with one timer for all of them rather than a
 * setTimeout/clearTimeout pair per call (the largest per-decision cost on the Redis path after the
 * store itself). Calls share `ms`, so their deadlines fall in the order they start: a FIFO kept in
 * start order is also in deadline order, and the one timer only ever waits for its oldest entry.
 */
export class Timeouts {
  private pending: Pending[] = []
  private timer: NodeJS.Timeout | undefined

  constructor(private readonly ms: number) {}

  /**
   * Settles like `promise`, or rejects with STORE_TIMEOUT after the limit. The original promise
   * keeps a handler either way, so a late rejection (e.g. a connection error after the timeout)
   * is never an unhandled rejection.
   */
  run<T>(promise: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const entry: Pending = { deadline: performance.now() + this.ms, reject, settled: false }
      this.pending.push(entry)
      if (this.timer === undefined) this.arm(this.ms)
      promise.then(
        (value) => {
          entry.settled = true
          resolve(value)
        },
        (error: unknown) => {
          entry.settled = true
          reject(error)
        },
      )
    })
  }

  private arm(delayMs: number): void {
    this.timer = setTimeout(this.expire, Math.max(1, Math.ceil(delayMs)))
  }

  private readonly expire = (): void => {
    this.timer = undefined
    const now = performance.now()
    let i = 0
    for (; i < this.pending.length; i++) {
      const entry = this.pending[i]
      if (entry.settled) continue
      if (entry.deadline > now) break
      entry.settled = true
      entry.reject(
        new FloodgateError('STORE_TIMEOUT', `the store did not answer within ${this.ms}ms; check the store, or raise the limiter's timeout option`),
      )
    }
    // Settled entries before the first live one are dropped; the rest wait for the next turn.
    while (i < this.pending.length && this.pending[i].settled) i++
    this.pending = i === this.pending.length ? [] : this.pending.slice(i)
    if (this.pending.length > 0) this.arm(this.pending[0].deadline - now)
  }
}
