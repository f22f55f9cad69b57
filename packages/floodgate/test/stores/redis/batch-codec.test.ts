// The script's binary reply: decodeReply reads it field by field and refuses one of the wrong size.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createPolicies } from '../../../src/core/policy.js'
import { decodeReply, encodeCall, readServerClock, type CallRequest } from '../../../src/stores/redis/batch-codec.js'
import { FloodgateError } from '../../../src/core/errors.js'

const two = createPolicies([
  { name: 'a', algorithm: 'fixed-window', limit: 10, period: '1m' },
  { name: 'b', algorithm: 'gcra', limit: 5, period: '1s' },
])
const one = [two[0]]

const requests: CallRequest[] = [
  { request: { key: 'x', policies: two, cost: 1 }, keys: ['k1', 'k2'], slot: -1 },
  { request: { key: 'y', policies: one, cost: 1, now: 42 }, keys: ['k3'], slot: -1 },
]

/** A reply as runner.lua packs it: clock, then per request a byte, per policy flags and four doubles. */
function reply(serverNow: number, parts: (number | number[])[]): Buffer {
  const chunks: Buffer[] = []
  const clock = Buffer.alloc(8)
  clock.writeDoubleLE(serverNow)
  chunks.push(clock)
  for (const part of parts) {
    if (typeof part === 'number') {
      chunks.push(Buffer.from([part]))
      continue
    }
    const policy = Buffer.alloc(33)
    policy[0] = part[0]
    for (let i = 1; i < 5; i++) policy.writeDoubleLE(part[i], 1 + 8 * (i - 1))
    chunks.push(policy)
  }
  return Buffer.concat(chunks)
}

const good = reply(1_700_000_000_123, [0, [1, 9, 60_000, 0, 0], [2, 0, 3_600_000_000, 2 ** 40, 0], 1, [1, 4, 7, 0, 5]])

test('decodeReply reads each request and policy, and the server clock when the request had no now', () => {
  assert.deepEqual(decodeReply(good, requests), [
    {
      allowed: false,
      now: 1_700_000_000_123,
      results: [
        { allowed: true, remaining: 9, resetMs: 60_000, retryAfterMs: 0, delayMs: 0, blocked: false },
        { allowed: false, remaining: 0, resetMs: 3_600_000_000, retryAfterMs: 2 ** 40, delayMs: 0, blocked: true },
      ],
    },
    {
      allowed: true,
      now: 42,
      results: [{ allowed: true, remaining: 4, resetMs: 7, retryAfterMs: 0, delayMs: 5, blocked: false }],
    },
  ])
})

test('decodeReply rejects a truncated or overlong reply, and one that is not binary', () => {
  assert.throws(() => decodeReply(good.subarray(0, good.length - 1), requests), /reply has 108 bytes, expected 109/)
  assert.throws(() => decodeReply(Buffer.concat([good, Buffer.from([0])]), requests), /reply has 110 bytes, expected 109/)
  assert.throws(() => decodeReply(good, requests.slice(0, 1)), /expected 75/)
  assert.throws(() => decodeReply([1, 2, 3], requests), /unexpected script reply/)
})

test("a reply of the clock and 'expired' (the call ran past its deadline) is STORE_TIMEOUT for every request", () => {
  const expired = Buffer.concat([good.subarray(0, 8), Buffer.from('expired')])
  assert.equal(readServerClock(expired), 1_700_000_000_123)
  assert.throws(
    () => decodeReply(expired, requests),
    (error: unknown) => error instanceof FloodgateError && error.code === 'STORE_TIMEOUT',
  )
})

test('the deadline is the first argument of a call, empty when there is none', () => {
  assert.equal(encodeCall(requests, requests.length, 1_700_000_000_500).args[0], '1700000000500')
  assert.equal(encodeCall(requests, requests.length).args[0], '')
})
