// Shared by the limiter tests: a settable clock, a MemoryStore that counts its calls, and a real
// Store whose backend can be made to fail, hang or answer late.

import { MemoryStore } from '../../src/stores/memory/memory-store.js'
import type { KeyEvaluation } from '../../src/core/evaluate.js'
import type { Policy } from '../../src/core/policy.js'
import type { EvaluateRequest, EvaluateResponse, Store, SubmitCallback } from '../../src/stores/store.js'

export const T0 = 1_700_000_000_000

/** A clock tests move by hand. */
export class Clock {
  now = T0
  readonly read = (): number => this.now
  advance(ms: number): void {
    this.now += ms
  }
}

/** The embedded store, counting the decisions it is asked for (to prove a call never reached it). */
export class CountingMemoryStore extends MemoryStore {
  calls = 0

  override evaluateInto(key: string, policies: readonly Policy[], cost: number, out: KeyEvaluation, now?: number): KeyEvaluation {
    this.calls++
    return super.evaluateInto(key, policies, cost, out, now)
  }
}

export type Health = 'ok' | 'throw' | 'hang' | 'late-reject'

/**
 * A remote-like Store: answers through a promise on a later turn, like a network store. Its
 * health decides what a call does: answer, fail at once, never answer, or fail after `lateMs`.
 */
export class FaultyStore implements Store {
  health: Health = 'ok'
  /** Delay of every healthy answer, and of a late rejection. */
  delayMs = 0
  lateMs = 50
  calls = 0
  private readonly inner: MemoryStore
  private readonly timers = new Set<NodeJS.Timeout>()

  constructor(clock: Clock) {
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
    for (const timer of this.timers) clearTimeout(timer)
    await this.inner.close()
  }

  private answer<T>(work: () => Promise<T>): Promise<T> {
    const health = this.health
    if (health === 'throw') return Promise.reject(new Error('connection refused'))
    if (health === 'hang') return new Promise<T>(() => {})
    const wait = health === 'late-reject' ? this.lateMs : this.delayMs
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.timers.delete(timer)
        if (health === 'late-reject') reject(new Error('connection reset'))
        else work().then(resolve, reject)
      }, wait)
      this.timers.add(timer)
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
