// Bounds store calls in time, so a slow or vanished store turns into the limiter's failure mode.

import { FloodgateError } from '../core/errors.js'
import { LatencyPeak } from './latency-peak.js'

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
  /**
   * Calls `callback` once the I/O already waiting has been read (default: the global
   * `setImmediate`). Optional: without it, a timeout is judged as soon as its timer fires.
   */
  setImmediate?(callback: () => void): unknown
}

/** The real clock and timer. */
export const REAL_TIMERS: Timers = Object.freeze({
  now: () => performance.now(),
  setTimeout: (callback: () => void, ms: number): TimerHandle => setTimeout(callback, ms),
  setImmediate: (callback: () => void): unknown => setImmediate(callback),
})

/** One call being timed (see Timeouts.start). */
export interface TimeoutEntry {
  /** When it started, on the Timers' clock. */
  readonly startedAt: number
  /**
   * The latest it times out, on the Timers' clock (start + the timeout's maximum): what the store is
   * told, so that it charges nothing for a call its caller no longer waits for.
   */
  readonly deadline: number
  readonly onTimeout: (error: FloodgateError) => void
  settled: boolean
}

// What a slot before the FIFO's head holds once its entry is gone.
const GONE: TimeoutEntry = Object.freeze({ startedAt: 0, deadline: 0, onTimeout: () => {}, settled: true })

// The timer while an expiry waits for the I/O already read to be handled (see onTimer).
const YIELDING: TimerHandle = Object.freeze({})

/** An adaptive deadline is this many times the slowest recent answer (within its minimum and maximum). */
export const DEADLINE_FACTOR = 3
/** How long a slow answer keeps the adaptive deadline up: one to two of these. */
export const LATENCY_HORIZON_MS = 10_000

/**
 * Times out calls, with one timer for all of them rather than a setTimeout/clearTimeout pair per
 * call (the largest per-decision cost on the Redis path after the store itself).
 *
 * Fixed (`minMs` = `maxMs`, the default): a call times out `maxMs` after it started.
 *
 * Adaptive (`minMs` < `maxMs`): it tells a slow store from a dead one. A call times out once it
 * has waited the adaptive deadline — `DEADLINE_FACTOR` × the slowest answer of the last
 * ~`LATENCY_HORIZON_MS` with answers, late answers included, at least `minMs`; `maxMs` until the
 * store first answered — *and* the store has answered nothing (no call at all) for that long; or,
 * whatever the store does, once it has waited `maxMs`.
 * A loaded machine slows every answer, and they keep coming: the deadline grows with them, and a
 * call in a queue that is still moving waits its turn. A dead or frozen store answers nothing, and
 * its calls time out after the adaptive deadline, which follows the store's usual speed.
 *
 * Either way calls time out in start order: every call in flight is held to the same adaptive
 * deadline, the one of the moment (so one that shrank applies to them all at once), and an older
 * call has always waited longer. A FIFO kept in start order is thus also in expiry order, and the
 * one timer only ever waits for its oldest entry. Settled entries leave the front of the FIFO as soon as they settle (calls mostly
 * settle in the order they started), so it holds about the calls in flight, not every call of the
 * last `maxMs`: a long timeout would otherwise keep hundreds of thousands of settled entries alive,
 * and the garbage collector would copy them all into the old generation.
 */
export class Timeouts {
  private pending: TimeoutEntry[] = []
  // Entries before `head` are settled and gone; the array is compacted once they are the larger part.
  private head = 0
  private timer: TimerHandle | undefined
  // When the timer fires, and its generation: a timer replaced by an earlier one finds itself stale.
  private armedAt = 0
  private generation = 0
  private readonly minMs: number
  private readonly adaptive: boolean
  // Adaptive only: the slowest recent answers, and when the store last answered anything.
  private readonly latency: LatencyPeak | undefined
  private lastAnswerAt = -Infinity

  /** `maxMs`: the longest any call waits; `minMs` (default `maxMs`: fixed): the shortest adaptive deadline. */
  constructor(
    private readonly maxMs: number,
    private readonly timers: Timers = REAL_TIMERS,
    minMs: number = maxMs,
  ) {
    this.minMs = Math.min(minMs, maxMs)
    this.adaptive = this.minMs < maxMs
    this.latency = this.adaptive ? new LatencyPeak(LATENCY_HORIZON_MS, timers.now()) : undefined
  }

  /** Calls started and not yet settled or timed out (at most; a few settled ones may still count). */
  get size(): number {
    return this.pending.length - this.head
  }

  /** How long a call started now waits for a store that answers nothing: the adaptive deadline (`maxMs` when fixed). */
  currentMs(now: number = this.timers.now()): number {
    // No answer seen yet: nothing tells a slow store from a dead one, so the first calls wait up to the maximum.
    if (!this.adaptive || !this.latency!.seen) return this.maxMs
    const scaled = DEADLINE_FACTOR * this.latency!.peak(now)
    return Math.min(this.maxMs, Math.max(this.minMs, scaled))
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
    const now = this.timers.now()
    const entry: TimeoutEntry = { startedAt: now, deadline: now + this.maxMs, onTimeout, settled: false }
    const first = this.pending.length === this.head
    this.pending.push(entry)
    if (this.timer === undefined) this.arm(this.currentMs(now))
    else if (first && this.timer !== YIELDING && this.armedAt > now + this.currentMs(now) + 1) this.arm(this.currentMs(now))
    else this.timer.ref?.() // a no-op unless the FIFO had emptied
    return entry
  }

  /**
   * Marks the call answered (by an answer or an error of the store). False when it had timed out
   * already: its answer comes too late. A late answer still counts, adaptively: the store is slow,
   * not dead, and its latency raises the deadline of the calls after it.
   */
  settle(entry: TimeoutEntry): boolean {
    if (this.adaptive && entry !== GONE) {
      const now = this.timers.now()
      const first = !this.latency!.seen
      this.lastAnswerAt = now
      this.latency!.record(now - entry.startedAt, now)
      // The first answer ends "wait up to the maximum": the calls in flight get the new deadline.
      if (first && this.timer !== undefined && this.timer !== YIELDING && this.size > 0) this.arm(this.currentMs(now))
    }
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
    const ms = Math.max(1, Math.ceil(delayMs))
    const generation = ++this.generation
    // A timer replaced before it fired does nothing then; it must not hold the process open meanwhile.
    this.timer?.unref?.()
    this.armedAt = this.timers.now() + ms
    this.timer = this.timers.setTimeout(() => {
      if (generation === this.generation) this.onTimer()
    }, ms)
  }

  // A timer that fires late (this process was busy, or not scheduled) runs before the event loop
  // reads the sockets: answers that came in time would be sitting unread. The expiry waits for
  // them (one setImmediate: after the I/O of this turn), so only a call still unanswered times out.
  private readonly onTimer = (): void => {
    const immediate = this.timers.setImmediate
    if (immediate === undefined) return this.expire()
    this.timer = YIELDING
    immediate(this.expire)
  }

  private readonly expire = (): void => {
    this.timer = undefined
    const now = this.timers.now()
    const pending = this.pending
    const waitMs = this.currentMs(now)
    // Adaptive: a call that waited the deadline times out only if the store answered nothing for as long.
    const silent = !this.adaptive || now - this.lastAnswerAt >= waitMs
    let i = this.head
    for (; i < pending.length; i++) {
      const entry = pending[i]
      if (entry.settled) continue
      if (entry.deadline > now && (!silent || now - entry.startedAt < waitMs)) break
      entry.settled = true
      entry.onTimeout(new FloodgateError('STORE_TIMEOUT', this.message(now - entry.startedAt)))
    }
    // Settled entries before the first live one are dropped; the rest wait for the next turn.
    while (i < pending.length && pending[i].settled) i++
    this.pending = i === pending.length ? [] : pending.slice(i)
    this.head = 0
    if (this.pending.length === 0) return
    const first = this.pending[0]
    // The next moment the oldest call can time out: once it waited the deadline and the store was
    // silent as long (checked again then: answers may come meanwhile), or at its hard deadline.
    const wake = this.adaptive ? first.startedAt + waitMs + Math.max(0, this.lastAnswerAt - first.startedAt) : first.deadline
    this.arm(Math.min(wake, first.deadline) - now)
  }

  private message(waitedMs: number): string {
    const waited = Math.round(waitedMs)
    if (!this.adaptive) {
      return `the store did not answer within ${this.maxMs}ms; check the store, or raise the limiter's timeout option`
    }
    return (
      `the store did not answer within ${waited}ms (adaptive timeout: ${this.minMs}ms to ${this.maxMs}ms, ` +
      `${DEADLINE_FACTOR}× its slowest recent answer); check the store, or raise the limiter's timeout option`
    )
  }
}
