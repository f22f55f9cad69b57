// Lane: two calls in flight per server at most; requests that come meanwhile wait and go together
// as one call the moment one answers — before the code that handles that answer runs on.

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { Lane, MIN_PART, STALL_MS } from '../../../src/stores/redis/lane.js'

/** A lane of named requests; `started` lists its calls in start order, `finish(i)` answers the i-th. */
function recordingLane(maxBatch = 512) {
  const started: string[][] = []
  const dones: (() => void)[] = []
  const lane = new Lane<string>((requests, done) => {
    started.push(requests)
    dones.push(done)
  }, maxBatch)
  const finish = (i: number) => {
    assert.ok(i < dones.length, `call ${i} was never started`)
    dones[i]()
  }
  return { lane, started, finish }
}

const named = (prefix: string, count: number) => Array.from({ length: count }, (_, i) => `${prefix}${i}`)

test('a batch goes at once while fewer than DEPTH calls are in flight; what comes then goes as one call when one answers', () => {
  assert.equal(Lane.DEPTH, 2)
  const { lane, started, finish } = recordingLane()
  lane.submit(['a'])
  lane.submit(['b'])
  assert.deepEqual(started, [['a'], ['b']])
  lane.submit(['c'])
  lane.submit(['d', 'e'])
  assert.equal(started.length, 2, 'c, d and e wait')
  assert.equal(lane.queued, 3)
  finish(1)
  assert.deepEqual(started[2], ['c', 'd', 'e'], "the waiting requests went as one call inside b's done")
  assert.equal(lane.queued, 0)
  finish(0)
  lane.submit(['f'])
  assert.deepEqual(started[3], ['f'], 'with a call free, a batch goes at once again')
  finish(2)
  finish(3)
})

test('a big batch goes in two halves: one at once, the other with what comes next or when a call answers', () => {
  const { lane, started, finish } = recordingLane()
  lane.submit(named('r', 2 * MIN_PART + 1))
  assert.deepEqual(started.map((call) => call.length), [MIN_PART + 1])
  assert.equal(lane.queued, MIN_PART)
  lane.submit(['x'])
  assert.deepEqual(started.map((call) => call.length), [MIN_PART + 1, MIN_PART + 1], 'the waiting half went with x')
  lane.submit(named('s', 2 * MIN_PART - 1))
  assert.equal(started.length, 2, 'two calls in flight: the rest waits')
  finish(0)
  assert.equal(started[2].length, 2 * MIN_PART - 1)
  assert.deepEqual(started.flat(), [...named('r', 2 * MIN_PART + 1), 'x', ...named('s', 2 * MIN_PART - 1)], 'in order, each request once')
})

test('no call holds more than maxBatch requests', () => {
  const { lane, started, finish } = recordingLane(50)
  lane.submit(named('a', 30))
  lane.submit(named('b', 40))
  lane.submit(named('c', 120))
  assert.deepEqual(started.map((call) => call.length), [30, 40])
  for (let i = 0; i < 5; i++) finish(i)
  assert.deepEqual(started.map((call) => call.length), [30, 40, 50, 50, 20])
  assert.deepEqual(started.flat(), [...named('a', 30), ...named('b', 40), ...named('c', 120)])
})

test('calls in flight that never answer are given up on after STALL_MS: what waits goes, late answers count for nothing', async () => {
  const { lane, started, finish } = recordingLane()
  lane.submit(['lost-1'])
  lane.submit(['lost-2'])
  lane.submit(['waiting'])
  await sleep(STALL_MS + 30)
  assert.deepEqual(started, [['lost-1'], ['lost-2'], ['waiting']])
  finish(0) // a late answer of the given-up epoch frees nothing
  lane.submit(['next'])
  assert.deepEqual(started[3], ['next'], "only 'waiting' is in flight")
  lane.submit(['after'])
  assert.equal(lane.queued, 1, 'two in flight again')
  finish(2)
  assert.deepEqual(started[4], ['after'])
})

test('a lane whose calls keep answering never counts as stalled, however long requests wait in all', async () => {
  const { lane, started, finish } = recordingLane()
  let next = 0
  lane.submit([`r${next++}`])
  lane.submit([`r${next++}`])
  lane.submit([`r${next++}`])
  // Every 5 ms the oldest call answers and another request comes, for 6 × STALL_MS: always one waiting.
  for (let i = 0; i < (6 * STALL_MS) / 5; i++) {
    await sleep(5)
    finish(i)
    lane.submit([`r${next++}`])
    assert.equal(lane.queued, 1, `round ${i}: one request waits behind the two in flight`)
  }
  assert.equal(started.length, next - 1, 'none was let through by a stall')
})
