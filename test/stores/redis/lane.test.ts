// Lane: one call in flight per server; calls submitted meanwhile wait and start together the
// moment it answers — before the code that handles that answer runs on.

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Lane } from '../../../src/stores/redis/lane.js'

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

test('a call for an idle lane starts at once; the lane is busy until it answers', () => {
  const { lane, started, finish } = recordingLane()
  assert.equal(lane.idle, true)
  lane.submit('a')
  assert.deepEqual(started, ['a'])
  assert.equal(lane.idle, false)
  finish('a')
  assert.equal(lane.idle, true)
})

test('calls submitted while one is in flight wait, then all start inside its done, in order', () => {
  const { lane, started, finish } = recordingLane()
  lane.submit('a')
  lane.submit('b')
  lane.submit('c')
  assert.deepEqual(started, ['a'])
  finish('a')
  assert.deepEqual(started, ['a', 'b', 'c'], 'b and c started before finish returned')
  lane.submit('d')
  finish('b')
  assert.deepEqual(started, ['a', 'b', 'c'], 'd waits while c is still in flight')
  finish('c')
  assert.deepEqual(started, ['a', 'b', 'c', 'd'])
  finish('d')
  assert.equal(lane.idle, true)
})
