// Bounds store calls in time, so a slow or vanished store turns into the limiter's failure mode.

import { FloodgateError } from '../core/errors.js'

/** A timer as `Timers.setTimeout` returns it; Node's has ref/unref, which keep the process open or not. */
export interface TimerHandle {
  ref?(): unknown
  unref?(): unknown
}

/**
 * The monotonic clock and the timer the limiter's timeouts run on. The default is the real ones
 * (`performance.now()`, the global `setTimeout`); tests inject manual ones so that no timeout
 * ever races the load of the machine.
 */
export interface Timers {
  /** Milliseconds on a clock that never goes back (default `performance.now()`). */
  now(): number
  /** Calls `callback` once, `ms` after now (default: the global `setTimeout`). */
  setTimeout(callback: () => void, ms: number): TimerHandle
}

/** The real clock and timer. */
export const REAL_TIMERS: Timers = Object.freeze({
  now: () => performance.now(),
  setTimeout: (callback: () => void, ms: number): TimerHandle => setTimeout(callback, ms),
})

/** One call being timed (see Timeouts.start). */
export interface TimeoutEntry {
  /** When it times out, on the Timers' clock. */
  readonly deadline: number
  readonly onTimeout: (error: FloodgateError) => void
  settled: boolean
}

// What a slot before the FIFO's head holds once its entry is gone.
const GONE: TimeoutEntry = Object.freeze({ deadline: 0, onTimeout: () => {}, settled: true })

/**
 * Times out calls that all share one limit, with one timer for all of them rather than a
 * setTimeout/clearTimeout pair per call (the largest per-decision cost on the Redis path after the
 * store itself). Calls share `ms`, so their deadlines fall in the order they start: a FIFO kept in
 * start order is also in deadline order, and the one timer only ever waits for its oldest entry.
 *
 * Settled entries leave the front of the FIFO as soon as they settle (calls mostly settle in the
 * order they started), so it holds about the calls in flight, not every call of the last `ms`: a
 * long timeout would otherwise keep hundreds of thousands of settled entries alive, and the
 * garbage collector would copy them all into the old generation.
 */
export class Timeouts {
  private pending: TimeoutEntry[] = []
  // Entries before `head` are settled and gone; the array is compacted once they are the larger part.
  private head = 0
  private timer: TimerHandle | undefined

  constructor(
    private readonly ms: number,
    private readonly timers: Timers = REAL_TIMERS,
  ) {}

  /** Calls started and not yet settled or timed out (at most; a few settled ones may still count). */
  get size(): number {
    return this.pending.length - this.head
  }

  /**
   * Settles like `promise`, or rejects with STORE_TIMEOUT after the limit. The original promise
   * keeps a handler either way, so a late rejection (e.g. a connection error after the timeout)
   * is never an unhandled rejection.
   */
  run<T>(promise: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const entry = this.start(reject)
      promise.then(
        (value) => {
          if (this.settle(entry)) resolve(value)
        },
        (error: unknown) => {
          if (this.settle(entry)) reject(error)
        },
      )
    })
  }

  /**
   * Starts timing a call: `onTimeout` runs with a STORE_TIMEOUT error once the limit passes, unless
   * `settle(entry)` came first. For callers that are answered by callback rather than a promise.
   */
  start(onTimeout: (error: FloodgateError) => void): TimeoutEntry {
    const entry: TimeoutEntry = { deadline: this.timers.now() + this.ms, onTimeout, settled: false }
    this.pending.push(entry)
    if (this.timer === undefined) this.arm(this.ms)
    else this.timer.ref?.() // a no-op unless the FIFO had emptied
    return entry
  }

  /** Marks the call answered. False when it had timed out already: its answer comes too late. */
  settle(entry: TimeoutEntry): boolean {
    if (entry.settled) return false
    this.forget(entry)
    return true
  }

  private forget(entry: TimeoutEntry): void {
    entry.settled = true
    const pending = this.pending
    if (pending[this.head] !== entry) return
    // Slots before `head` are cleared as it passes them: a settled entry's callback holds its
    // caller's promise and decision, which would otherwise live on until the next compaction.
    pending[this.head] = GONE
    let head = this.head + 1
    while (head < pending.length && pending[head].settled) pending[head++] = GONE
    if (head === pending.length) {
      // Nothing left to time out. The timer stays, unref'd so that it holds no process open:
      // re-arming it for every call of a lightly loaded limiter would cost more than the call.
      this.pending = []
      this.head = 0
      this.timer?.unref?.()
    } else if (head > 1024 && head * 2 > pending.length) {
      this.pending = pending.slice(head)
      this.head = 0
    } else {
      this.head = head
    }
  }

  private arm(delayMs: number): void {
    this.timer = this.timers.setTimeout(this.expire, Math.max(1, Math.ceil(delayMs)))
  }

  private readonly expire = (): void => {
    this.timer = undefined
    const now = this.timers.now()
    const pending = this.pending
    let i = this.head
    for (; i < pending.length; i++) {
      const entry = pending[i]
      if (entry.settled) continue
      if (entry.deadline > now) break
      entry.settled = true
      const message = `the store did not answer within ${this.ms}ms; check the store, or raise the limiter's timeout option`
      entry.onTimeout(new FloodgateError('STORE_TIMEOUT', message))
    }
    // Settled entries before the first live one are dropped; the rest wait for the next turn.
    while (i < pending.length && pending[i].settled) i++
    this.pending = i === pending.length ? [] : pending.slice(i)
    this.head = 0
    if (this.pending.length > 0) this.arm(this.pending[0].deadline - now)
  }
}
