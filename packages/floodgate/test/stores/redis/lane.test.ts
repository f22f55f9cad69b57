// Lane: one call in flight per server; requests that come meanwhile wait and go together as one
// call the moment it answers — before the code that handles that answer runs on.

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

test('a batch for an idle lane goes at once; what comes while a call is in flight goes as one call when it answers', () => {
  const { lane, started, finish } = recordingLane()
  lane.submit(['a'])
  assert.deepEqual(started, [['a']])
  lane.submit(['b'])
  lane.submit(['c', 'd'])
  assert.equal(started.length, 1, 'b, c and d wait')
  assert.equal(lane.queued, 3)
  finish(0)
  assert.deepEqual(started, [['a'], ['b', 'c', 'd']], "the waiting requests went as one call inside a's done")
  assert.equal(lane.queued, 0)
  finish(1)
  lane.submit(['e'])
  assert.deepEqual(started[2], ['e'], 'an idle lane sends at once again')
})

test('a big batch for an idle lane goes in two halves, the second when the first answers', () => {
  const { lane, started, finish } = recordingLane()
  lane.submit(named('r', 2 * MIN_PART + 1))
  assert.deepEqual(
    started.map((call) => call.length),
    [MIN_PART + 1],
  )
  assert.equal(lane.queued, MIN_PART)
  finish(0)
  assert.deepEqual(
    started.map((call) => call.length),
    [MIN_PART + 1, MIN_PART],
  )
  assert.deepEqual(started.flat(), named('r', 2 * MIN_PART + 1), 'in order, each request once')
  lane.submit(named('s', 2 * MIN_PART - 1))
  assert.equal(started.length, 2, 'a batch too small to halve waits whole behind the call in flight')
  finish(1)
  assert.equal(started[2].length, 2 * MIN_PART - 1)
})

test('no call holds more than maxBatch requests', () => {
  const { lane, started, finish } = recordingLane(50)
  lane.submit(named('a', 30))
  lane.submit(named('b', 120))
  assert.deepEqual(
    started.map((call) => call.length),
    [30],
  )
  for (let i = 0; i < 4; i++) finish(i)
  assert.deepEqual(
    started.map((call) => call.length),
    [30, 50, 50, 20],
  )
  assert.deepEqual(started.flat(), [...named('a', 30), ...named('b', 120)])
})

test('a call in flight that never answers is given up on after STALL_MS: what waits goes, a late answer counts for nothing', async () => {
  const { lane, started, finish } = recordingLane()
  lane.submit(['lost'])
  lane.submit(['waiting'])
  await sleep(STALL_MS + 30)
  assert.deepEqual(started, [['lost'], ['waiting']])
  finish(0) // a late answer of the given-up epoch starts nothing
  lane.submit(['next'])
  assert.equal(started.length, 2, "'waiting' is still in flight")
  finish(1)
  assert.deepEqual(started[2], ['next'])
})

test('a lane whose calls keep answering never counts as stalled, however long requests wait in all', async () => {
  const { lane, started, finish } = recordingLane()
  let next = 0
  lane.submit([`r${next++}`])
  lane.submit([`r${next++}`])
  // Every 5 ms the call in flight answers and another request comes, for 6 × STALL_MS: always one waiting.
  for (let i = 0; i < (6 * STALL_MS) / 5; i++) {
    await sleep(5)
    finish(i)
    lane.submit([`r${next++}`])
    assert.equal(lane.queued, 1, `round ${i}: one request waits behind the call in flight`)
  }
  assert.equal(started.length, next - 1, 'none was let through by a stall')
})
