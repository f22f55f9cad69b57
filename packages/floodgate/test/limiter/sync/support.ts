// Test doubles for write-back sync: a simulated clock and timers, and a store wrapper whose calls can
// fail, lose their answer after applying, or hang, around a real MemoryStore.

import type { MemoryStore } from '../../../src/stores/memory/memory-store.js'
import type { MergeRequest, MergeResponse, Store } from '../../../src/stores/store.js'
import type { WriteBackTimers } from '../../../src/limiter/sync/write-back.js'

/** A clock and timers that move only when the test says. */
export class SimTime implements WriteBackTimers {
  now: number
  private timers: { at: number; callback: () => void; id: number }[] = []
  private ids = 0

  constructor(start: number) {
    this.now = start
  }

  readonly clock = (): number => this.now

  setTimeout(callback: () => void, ms: number): object {
    const id = ++this.ids
    this.timers.push({ at: this.now + ms, callback, id })
    return {}
  }

  /** Moves the clock and runs the timers that fall due, in order. */
  advance(ms: number): void {
    const until = this.now + ms
    for (;;) {
      const due = this.timers.filter((timer) => timer.at <= until).sort((a, b) => a.at - b.at)[0]
      if (due === undefined) break
      this.timers = this.timers.filter((timer) => timer !== due)
      this.now = Math.max(this.now, due.at)
      due.callback()
    }
    this.now = until
  }
}

/** How the next merge calls behave. */
export type CallMode = 'ok' | 'fail' | 'lost' | 'hang'

/** One instance's way to the shared store: merges pass, fail unapplied, apply and lose the answer, or hang. */
export class FlakyStore implements Store {
  mode: CallMode = 'ok'
  calls = 0

  constructor(private readonly inner: MemoryStore) {}

  merge(batch: readonly MergeRequest[]): Promise<MergeResponse[]> {
    this.calls++
    const mode = this.mode
    if (mode === 'fail') return Promise.reject(new Error('connection refused'))
    if (mode === 'hang') return new Promise(() => {})
    const answers = this.inner.merge(batch)
    if (mode === 'lost') return answers.then(() => Promise.reject(new Error('connection lost before the answer')))
    return answers
  }

  evaluate(): never {
    throw new Error('write-back tests decide through merge only')
  }

  reset(): Promise<void> {
    return Promise.resolve()
  }

  close(): Promise<void> {
    return Promise.resolve()
  }
}

/** Lets every promise callback already due run (store answers are promises). */
export function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve))
}
