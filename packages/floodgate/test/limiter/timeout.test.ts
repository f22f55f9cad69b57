// The shared timeout queue: hung calls time out in order with one timer, answered ones settle as
// they are, and a late failure after a timeout is never an unhandled rejection.

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { setTimeout as sleep } from 'node:timers/promises'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { Timeouts, type TimeoutEntry } from '../../src/limiter/timeout.js'
import { FloodgateError } from '../../src/core/errors.js'
import { Clock, nextTurn } from './fixtures.js'

/** A full garbage collection, without starting the test process with --expose-gc. */
function collectGarbage(): void {
  setFlagsFromString('--expose-gc')
  ;(runInNewContext('gc') as () => void)()
}

const never = <T>(): Promise<T> => new Promise<T>(() => {})

function isTimeout(error: unknown): boolean {
  return error instanceof FloodgateError && error.code === 'STORE_TIMEOUT'
}

describe('Timeouts', () => {
  it('passes answers and errors through as they are', async () => {
    const timeouts = new Timeouts(50)
    assert.equal(await timeouts.run(Promise.resolve(7)), 7)
    await assert.rejects(timeouts.run(Promise.reject(new Error('boom'))), /boom/)
  })

  it('times out every hung call, each no earlier than its own deadline, also those started later', async () => {
    // The clock moves 1ms at a time, so each call's timeout is seen at the very millisecond it fires.
    const clock = new Clock()
    const timers = clock.timers
    const timeouts = new Timeouts(40, timers)
    const settledAt = new Map<Promise<unknown>, number>()
    const track = <T>(promise: Promise<T>): Promise<T> => {
      promise.then(
        () => settledAt.set(promise, timers.now()),
        () => settledAt.set(promise, timers.now()),
      )
      return promise
    }
    const tick = async (ms: number) => {
      for (let i = 0; i < ms; i++) {
        clock.advance(1)
        await nextTurn()
      }
    }
    const started = timers.now()
    const first = track(timeouts.run(never()))
    await tick(25)
    const laterStart = timers.now()
    const later = track(timeouts.run(never()))
    const answered = track(timeouts.run(new Promise<string>((resolve) => timers.setTimeout(() => resolve('ok'), 5))))
    await tick(50)
    const firstAt = await first.then(
      () => assert.fail('a hung call resolved'),
      (error: unknown) => (assert.ok(isTimeout(error), String(error)), settledAt.get(first)!),
    )
    assert.equal(await answered, 'ok')
    const laterAt = await later.then(
      () => assert.fail('a hung call resolved'),
      (error: unknown) => (assert.ok(isTimeout(error), String(error)), settledAt.get(later)!),
    )
    // Timers may fire a little late but never early (1ms of slack for timer rounding).
    assert.ok(firstAt - started >= 39, `first timed out after ${firstAt - started}ms`)
    assert.ok(laterAt - laterStart >= 39, `later timed out after ${laterAt - laterStart}ms`)
  })

  it('keeps a handler on a call that fails after its timeout', async () => {
    const clock = new Clock()
    const timeouts = new Timeouts(10, clock.timers)
    const unhandled: unknown[] = []
    const onUnhandled = (reason: unknown) => unhandled.push(reason)
    process.on('unhandledRejection', onUnhandled)
    try {
      const late = new Promise<never>((_, reject) => clock.timers.setTimeout(() => reject(new Error('late')), 30))
      const timedOut = timeouts.run(late)
      clock.advance(10)
      await assert.rejects(timedOut, isTimeout)
      clock.advance(20)
      await nextTurn()
      await nextTurn()
      assert.deepEqual(unhandled, [])
    } finally {
      process.off('unhandledRejection', onUnhandled)
    }
  })

  it('forgets answered calls as they settle, in any order, so a long timeout holds only the calls in flight', async () => {
    const timeouts = new Timeouts(60_000)
    const calls = Array.from({ length: 5_000 }, (_, i) => timeouts.run(Promise.resolve(i)))
    assert.deepEqual((await Promise.all(calls)).slice(0, 3), [0, 1, 2])
    assert.equal(timeouts.size, 0)

    // Settled out of order: the front entry answers last, and then everything behind it goes too.
    let answerFirst!: (value: string) => void
    const first = timeouts.run(new Promise<string>((resolve) => (answerFirst = resolve)))
    const rest = Array.from({ length: 3_000 }, (_, i) => timeouts.run(Promise.resolve(i)))
    await Promise.all(rest)
    assert.equal(timeouts.size, 3_001, 'entries behind an unanswered call wait for it')
    let answerLast!: (value: string) => void
    const last = timeouts.run(new Promise<string>((resolve) => (answerLast = resolve)))
    answerFirst('done')
    assert.equal(await first, 'done')
    assert.equal(timeouts.size, 1, 'only the unanswered call is left')
    answerLast('done too')
    assert.equal(await last, 'done too')
    assert.equal(timeouts.size, 0)
  })

  it('lets an answered call be collected at once, not when the FIFO is next compacted', async () => {
    // In flight the whole test, so the FIFO is never emptied (which would drop everything anyway).
    const timeouts = new Timeouts(60_000)
    const oldest = timeouts.start(() => {})
    const refs: WeakRef<object>[] = []
    const entries = Array.from({ length: 500 }, () => {
      // The callback holds what a real caller's would (its promise, its decision): that is what must go.
      const held = { decision: new Array(64).fill(0) }
      refs.push(new WeakRef(held))
      return timeouts.start(() => void held)
    })
    // In a function of its own, so no variable of this frame still points at the last one answered.
    const answer = (answered: TimeoutEntry[]): void => answered.forEach((entry) => assert.ok(timeouts.settle(entry)))
    answer([oldest, ...entries.splice(0, 400)])
    assert.equal(timeouts.size, 100)
    // A WeakRef's target is kept until the current job ends: collect in a later one.
    await sleep(0)
    collectGarbage()
    const reachable = refs.slice(0, 400).filter((ref) => ref.deref() !== undefined).length
    assert.equal(reachable, 0, `${reachable} of 400 answered calls are still reachable`)
    assert.equal(refs.slice(400).filter((ref) => ref.deref() === undefined).length, 0, 'calls in flight were collected')
    for (const entry of entries) timeouts.settle(entry)
  })

  it('holds the process open only while a call is in flight', async () => {
    // A child with a one-minute timeout: one answered call, then nothing else to do. It must exit
    // on its own, long before the minute (the bound below is generous on purpose).
    const script = `
      import { Timeouts } from ${JSON.stringify(new URL('../../src/limiter/timeout.ts', import.meta.url).href)}
      const timeouts = new Timeouts(60_000)
      console.log(await timeouts.run(Promise.resolve('answered')))
    `
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    let output = ''
    child.stdout.on('data', (chunk: Buffer) => (output += chunk))
    const exited = once(child, 'exit')
    const outcome = await Promise.race([exited.then(() => 'exited'), sleep(30_000, undefined, { ref: false }).then(() => 'still running')])
    if (outcome !== 'exited') child.kill()
    assert.equal(outcome, 'exited')
    assert.equal(output.trim(), 'answered')
  })
})
