// The adaptive timeout (issue 26 §3): a slow store keeps deciding, a silent one times out after
// the adaptive deadline, and nothing waits past the maximum. Every timer runs on the test's clock.

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { FloodgateError } from '../../src/core/errors.js'
import { resolveOptions } from '../../src/limiter/options.js'
import { DEADLINE_FACTOR, LATENCY_HORIZON_MS, Timeouts, type TimeoutEntry } from '../../src/limiter/timeout.js'
import { Clock } from './fixtures.js'

const MIN = 100
const MAX = 1_000

/** Starts a call and records when (on the clock) it timed out. */
function track(timeouts: Timeouts, clock: Clock): { entry: TimeoutEntry; timedOutAt: () => number | undefined } {
  let at: number | undefined
  const entry = timeouts.start((error: FloodgateError) => {
    assert.equal(error.code, 'STORE_TIMEOUT')
    at = clock.now
  })
  return { entry, timedOutAt: () => at }
}

describe('adaptive Timeouts', () => {
  it('waits up to the maximum before the store first answered, then times out a silent store after the minimum', () => {
    const clock = new Clock()
    const timeouts = new Timeouts(MAX, clock.timers, MIN)
    // Nothing is known of the store yet: a slow first answer is no reason to fail.
    let start = clock.now
    const first = track(timeouts, clock)
    clock.advance(MAX - 1)
    assert.equal(first.timedOutAt(), undefined)
    clock.advance(1)
    assert.equal(first.timedOutAt(), start + MAX)
    // Its answer comes, fast: from now on a silent store fails a call after the minimum, not before.
    const answered = timeouts.start(() => {})
    clock.advance(5)
    timeouts.settle(answered)
    start = clock.now
    const call = track(timeouts, clock)
    clock.advance(MIN - 1)
    assert.equal(call.timedOutAt(), undefined)
    clock.advance(1)
    assert.equal(call.timedOutAt(), start + MIN)
  })

  it('raises the deadline after a late answer: a store that is slow, not dead, keeps deciding', () => {
    const clock = new Clock()
    const timeouts = new Timeouts(MAX, clock.timers, MIN)
    const fast = timeouts.start(() => {})
    clock.advance(10)
    timeouts.settle(fast)
    // The store turns slow, 250ms an answer: the first such call times out at 100ms, and its answer comes late.
    const first = track(timeouts, clock)
    clock.advance(MIN)
    assert.notEqual(first.timedOutAt(), undefined)
    clock.advance(150)
    assert.equal(timeouts.settle(first.entry), false, 'a late answer is late')
    assert.equal(timeouts.currentMs(clock.now), DEADLINE_FACTOR * 250)
    // The next one, as slow, is answered in time: its deadline is 3 × 250ms.
    const second = track(timeouts, clock)
    clock.advance(700)
    assert.equal(second.timedOutAt(), undefined)
    assert.equal(timeouts.settle(second.entry), true)
  })

  it('lets a call behind a moving queue wait past its deadline, and never past the maximum', () => {
    const clock = new Clock()
    const timeouts = new Timeouts(MAX, clock.timers, MIN)
    const fast = timeouts.start(() => {})
    clock.advance(10)
    timeouts.settle(fast)
    const hung = track(timeouts, clock)
    // The store answers another call every 60ms (under the 100ms deadline): it is alive, so the
    // hung call waits its turn; with no answer of its own it still times out at the maximum.
    const start = clock.now
    for (let t = 60; t < 1_500; t += 60) {
      const other = timeouts.start(() => {})
      clock.advance(60)
      timeouts.settle(other)
      if (hung.timedOutAt() !== undefined) break
    }
    assert.equal(hung.timedOutAt(), start + MAX)
  })

  it('times out within the adaptive deadline once the store falls silent, however many calls wait', () => {
    const clock = new Clock()
    const timeouts = new Timeouts(MAX, clock.timers, MIN)
    // A store answering in 20ms: the deadline stays at the minimum.
    for (let i = 0; i < 10; i++) {
      const call = timeouts.start(() => {})
      clock.advance(20)
      timeouts.settle(call)
    }
    assert.equal(timeouts.currentMs(clock.now), MIN)
    // It freezes (SIGSTOP): nothing answers. Every call times out within 2 × the deadline of its start.
    const calls = Array.from({ length: 50 }, (_, i) => {
      clock.advance(i % 2)
      return { start: clock.now, ...track(timeouts, clock) }
    })
    clock.advance(3 * MIN)
    for (const call of calls) {
      const at = call.timedOutAt()
      assert.ok(at !== undefined && at - call.start >= MIN && at - call.start <= 2 * MIN, `timed out after ${at! - call.start}ms`)
    }
  })

  it('forgets a spike once newer answers push it out, not by time alone; a shorter deadline never comes first', () => {
    const clock = new Clock()
    const timeouts = new Timeouts(MAX, clock.timers, MIN)
    const slow = timeouts.start(() => {})
    clock.advance(300)
    timeouts.settle(slow)
    assert.equal(timeouts.currentMs(clock.now), MAX * 0.9)
    const before = timeouts.start(() => {})
    // A quiet store is no faster: with no answers, the spike stays.
    clock.advance(3 * LATENCY_HORIZON_MS)
    assert.equal(timeouts.currentMs(clock.now), MAX * 0.9)
    // Fast answers over two horizons push it out.
    for (let t = 0; t < 2 * LATENCY_HORIZON_MS + 1_000; t += 500) {
      const fast = timeouts.start(() => {})
      clock.advance(10)
      timeouts.settle(fast)
      clock.advance(490)
    }
    assert.equal(timeouts.currentMs(clock.now), MIN)
    // The call started during the spike is held to today's deadline too, and times out first.
    let beforeAt: number | undefined
    let afterAt: number | undefined
    const after = timeouts.start(() => (afterAt = clock.now))
    clock.advance(MIN)
    assert.equal(afterAt, after.startedAt + MIN)
    assert.ok(beforeAt === undefined && before.settled, 'the older call timed out before the newer one')
    assert.equal(after.deadline - after.startedAt, MAX)
  })

  it('keeps a fixed timeout fixed: answers to other calls do not extend it', () => {
    const clock = new Clock()
    const timeouts = new Timeouts(MIN, clock.timers)
    const start = clock.now
    const hung = track(timeouts, clock)
    for (let i = 0; i < 5; i++) {
      const other = timeouts.start(() => {})
      clock.advance(30)
      timeouts.settle(other)
    }
    assert.equal(hung.timedOutAt(), start + MIN)
  })
})

describe('timeout option', () => {
  it('is adaptive by default, fixed when one duration is given, and checks its bounds', () => {
    const defaults = resolveOptions({})
    assert.deepEqual([defaults.timeoutMinMs, defaults.timeoutMs], [100, 2_000])
    const fixed = resolveOptions({ timeout: '250ms' })
    assert.deepEqual([fixed.timeoutMinMs, fixed.timeoutMs], [250, 250])
    const tuned = resolveOptions({ timeout: { min: '50ms', max: '10s' } })
    assert.deepEqual([tuned.timeoutMinMs, tuned.timeoutMs], [50, 10_000])
    assert.throws(() => resolveOptions({ timeout: { min: '2s', max: '1s' } }), /min \(2000ms\) is above max/)
    assert.throws(() => resolveOptions({ timeout: { floor: '1s' } as never }), /timeout\.floor: unknown option/)
  })
})
