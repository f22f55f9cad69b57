// Lane: one call in flight per server; calls submitted meanwhile wait, and the oldest starts the
// moment the call answers — before the code that handles that answer runs on.

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { Lane, STALL_MS } from '../../../src/stores/redis/lane.js'

/** A lane whose calls are names; `started` lists them in start order, `finish(name)` answers one. */
function recordingLane() {
  const started: string[] = []
  const dones = new Map<string, () => void>()
  const lane = new Lane<string>((call, done) => {
    started.push(call)
    dones.set(call, done)
  })
  const finish = (call: string) => {
    const done = dones.get(call)
    assert.ok(done, `${call} was never started`)
    dones.delete(call)
    done()
  }
  return { lane, started, finish }
}

test('a call starts at once when none is in flight; the rest wait for an answer each', () => {
  assert.equal(Lane.DEPTH, 1)
  const { lane, started, finish } = recordingLane()
  assert.equal(lane.free, 1)
  lane.submit('a')
  assert.deepEqual(started, ['a'])
  assert.equal(lane.free, 0)
  lane.submit('b')
  lane.submit('c')
  assert.deepEqual(started, ['a'], 'b and c wait')
  finish('a')
  assert.deepEqual(started, ['a', 'b'], "b started inside a's done, before finish returned")
  finish('b')
  assert.deepEqual(started, ['a', 'b', 'c'])
  finish('c')
  assert.equal(lane.free, 1)
})

test('calls in flight that never answer are given up on after STALL_MS: what waits goes, late answers count for nothing', async () => {
  const { lane, started, finish } = recordingLane()
  lane.submit('lost')
  lane.submit('waiting')
  await sleep(STALL_MS + 30)
  assert.deepEqual(started, ['lost', 'waiting'])
  assert.equal(lane.free, 0, 'the call that went is in flight')
  finish('lost') // a late answer of the given-up epoch frees nothing
  assert.equal(lane.free, 0)
  finish('waiting')
  assert.equal(lane.free, 1)
})

test('a lane whose calls keep answering never counts as stalled, however long calls wait in all', async () => {
  const { lane, started, finish } = recordingLane()
  let next = 0
  const name = () => `call-${next++}`
  lane.submit(name())
  lane.submit(name())
  // Every 5 ms one call answers and another is submitted, for 6 × STALL_MS: always one waiting.
  for (let i = 0; i < (6 * STALL_MS) / 5; i++) {
    await sleep(5)
    finish(started[i])
    lane.submit(name())
    assert.equal(lane.free, 0, `round ${i}: only one in flight`)
  }
  assert.equal(started.length, next - 1, 'exactly one call waits: none was let through by a stall')
})
