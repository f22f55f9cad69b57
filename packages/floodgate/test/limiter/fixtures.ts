// Shared by the limiter tests: a settable clock with its timers, a MemoryStore that counts its calls,
// and a real Store whose backend can be made to fail, hang or answer late.

import { MemoryStore } from '../../src/stores/memory/memory-store.js'
import type { Policy } from '../../src/core/policy.js'
import type { EvaluateRequest, EvaluateResponse, Store, SubmitCallback } from '../../src/stores/store.js'
import type { TimerHandle, Timers } from '../../src/limiter/timeout.js'

export const T0 = 1_700_000_000_000

interface ManualTimer {
  at: number
  order: number
  callback: () => void
}

/**
 * A clock tests move by hand, and timers on it (`timers`, for the limiter's `timers` option): a
 * timer fires during the `advance` that reaches its time, never on its own, so no test races the
 * machine's load.
 */
export class Clock {
  now = T0
  readonly read = (): number => this.now
  private readonly due: ManualTimer[] = []
  private scheduled = 0
  readonly timers: Timers = {
    now: () => this.now,
    setTimeout: (callback: () => void, ms: number): TimerHandle => {
      this.due.push({ at: this.now + Math.max(0, ms), order: this.scheduled++, callback })
      return {}
    },
  }

  /** Moves the clock forward, firing every timer due on the way, in time order, each at its own time. */
  advance(ms: number): void {
    const end = this.now + ms
    for (;;) {
      let next: ManualTimer | undefined
      for (const timer of this.due) {
        if (timer.at > end) continue
        if (next === undefined || timer.at < next.at || (timer.at === next.at && timer.order < next.order)) next = timer
      }
      if (next === undefined) break
      this.due.splice(this.due.indexOf(next), 1)
      this.now = Math.max(this.now, next.at)
      next.callback()
    }
    this.now = end
  }

  /** Timers not yet fired. */
  get pendingTimers(): number {
    return this.due.length
  }
}

/** Lets promise callbacks and a later turn of the event loop run (e.g. an unhandled rejection be reported). */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve))
}

/** The embedded store, counting the decisions it is asked for (to prove a call never reached it). */
export class CountingMemoryStore extends MemoryStore {
  calls = 0

  override evaluateSync(request: EvaluateRequest): EvaluateResponse {
    this.calls++
    return super.evaluateSync(request)
  }
}

export type Health = 'ok' | 'throw' | 'hang' | 'late-reject'

/**
 * A remote-like Store: answers through a promise on a later turn, like a network store. Its
 * health decides what a call does: answer, fail at once, never answer, or fail after `lateMs`.
 * Delays run on the clock's timers: the test advances the clock to let them pass.
 */
export class FaultyStore implements Store {
  health: Health = 'ok'
  /** Delay of every healthy answer, and of a late rejection. */
  delayMs = 0
  lateMs = 50
  calls = 0
  private readonly inner: MemoryStore
  private readonly clock: Clock

  constructor(clock: Clock) {
    this.clock = clock
    this.inner = new MemoryStore({ clock: clock.read })
  }

  evaluate(batch: readonly EvaluateRequest[]): Promise<EvaluateResponse[]> {
    this.calls++
    return this.answer(() => this.inner.evaluate(batch))
  }

  reset(key: string, policies: readonly Policy[]): Promise<void> {
    this.calls++
    return this.answer(() => this.inner.reset(key, policies))
  }

  async close(): Promise<void> {
    await this.inner.close()
  }

  private answer<T>(work: () => Promise<T>): Promise<T> {
    const health = this.health
    if (health === 'throw') return Promise.reject(new Error('connection refused'))
    if (health === 'hang') return new Promise<T>(() => {})
    const wait = health === 'late-reject' ? this.lateMs : this.delayMs
    return new Promise<T>((resolve, reject) => {
      const settle = () => {
        if (health === 'late-reject') reject(new Error('connection reset'))
        else work().then(resolve, reject)
      }
      // No delay: a later turn of the event loop, as a network answer comes; a delay: the clock's.
      if (wait === 0) setImmediate(settle)
      else this.clock.timers.setTimeout(settle, wait)
    })
  }
}

/** A FaultyStore that also answers by callback (`Store.submit`), as RedisStore does. */
export class FaultySubmitStore extends FaultyStore {
  submit(request: EvaluateRequest, done: SubmitCallback): void {
    this.evaluate([request]).then(
      (responses) => done(null, responses[0]),
      (error: unknown) => done(error),
    )
  }
}
