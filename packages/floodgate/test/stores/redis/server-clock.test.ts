// ServerClock: a caller's deadline on the Redis server's clock, from the best lower bound of the offset.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { ServerClock } from '../../../src/stores/redis/server-clock.js'

const self = (deadline: number | undefined) => deadline

test('no deadline before a reply was read, nor for requests without one', () => {
  const clock = new ServerClock()
  assert.equal(clock.earliest([100], self), undefined)
  clock.learn(5_000, 100)
  assert.equal(clock.earliest([undefined, undefined], self), undefined)
})

test("the earliest deadline, moved by the largest offset sample: a slow reply's smaller sample never makes it later", () => {
  const clock = new ServerClock()
  clock.learn(1_000_050, 40) // the offset is at least 1_000_010
  clock.learn(1_000_100, 100) // a reply read late says only 1_000_000: the better bound stays
  assert.equal(clock.earliest([300, 250.7, undefined], self), 1_000_260)
  clock.learn(1_000_200, 150) // a better bound: 1_000_050
  assert.equal(clock.earliest([250], self), 1_000_300)
})

test('a larger sample is trusted for 10 s; after that a smaller one replaces it (a server clock stepped back)', () => {
  const clock = new ServerClock()
  clock.learn(2_000_000, 0)
  clock.learn(1_000_000, 9_000)
  assert.equal(clock.earliest([10_000], self), 2_010_000)
  clock.learn(1_000_000, 10_001)
  assert.equal(clock.earliest([20_000], self), 1_009_999)
})
