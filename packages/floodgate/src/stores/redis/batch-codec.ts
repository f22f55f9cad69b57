// Encodes a batch of requests into one runner.lua call (KEYS and ARGV) and decodes its binary reply.

import { FloodgateError } from '../../core/errors.js'
import type { Policy } from '../../core/policy.js'
import type { PolicyResult } from '../../core/evaluate.js'
import type { EvaluateRequest, EvaluateResponse } from '../store.js'

/** One request of a call, with its policy keys already built (in the request's policy order). */
export interface CallRequest {
  readonly request: EvaluateRequest
  readonly keys: readonly string[]
  /** Cluster slot of the request's keys (all share the hash tag); -1 on a standalone server. */
  readonly slot: number
}

/** The arguments of one script call. */
export interface EncodedCall {
  /** Keys declared to Redis (routing): the first `declared` requests' keys. */
  readonly keys: string[]
  readonly args: string[]
}

const FIELDS_PER_POLICY = 6

/**
 * Encodes `requests` for runner.lua. `deadline` (server ms; undefined: none) is the latest server
 * time at which the script may still charge: past it, it answers EXPIRED_REPLY and writes nothing.
 * The keys of the first `declared` requests go in KEYS (on a
 * Cluster: the requests of the routing slot), the rest in ARGV. Each distinct policy is sent once
 * and referred to by index, and consecutive requests alike but for their key (same clock, cost and
 * policies: the usual batch) are sent as one run, so a request usually costs the call only its key.
 * Consecutive requests of one slot form one read group, which the script reads with one MGET
 * (a Cluster node refuses one command over several slots, even inside a script).
 */
export function encodeCall(requests: readonly CallRequest[], declared: number, deadline?: number): EncodedCall {
  const keys: string[] = []
  const extraKeys: string[] = []
  const policyIndex = new Map<Policy, number>()
  const policyArgs: string[] = []
  const runArgs: string[] = []
  const groupSizes: number[] = []
  let runs = 0
  let runLength = 0
  for (let r = 0; r < requests.length; r++) {
    const { request, keys: requestKeys, slot } = requests[r]
    const target = r < declared ? keys : extraKeys
    for (const key of requestKeys) target.push(key)
    if (r === 0 || slot !== requests[r - 1].slot) groupSizes.push(requestKeys.length)
    else groupSizes[groupSizes.length - 1] += requestKeys.length
    if (r > 0 && sameRun(requests[r - 1].request, request)) {
      runLength++
      continue
    }
    if (r > 0) runArgs.push(String(runLength))
    runs++
    runLength = 1
    runArgs.push(request.now === undefined ? '' : String(request.now), String(request.cost), String(request.policies.length))
    for (const policy of request.policies) {
      let index = policyIndex.get(policy)
      if (index === undefined) {
        index = policyIndex.size + 1
        policyIndex.set(policy, index)
        policyArgs.push(
          policy.algorithm,
          String(policy.limit),
          String(policy.periodMs),
          String(policy.burst),
          policy.shaping ? '1' : '0',
          String(policy.blockMs),
        )
      }
      runArgs.push(String(index))
    }
  }
  if (runs > 0) runArgs.push(String(runLength))
  const args = [
    deadline === undefined ? '' : String(deadline),
    String(extraKeys.length),
    ...extraKeys,
    String(policyArgs.length / FIELDS_PER_POLICY),
    ...policyArgs,
    String(groupSizes.length),
    ...groupSizes.map(String),
    String(runs),
    ...runArgs,
  ]
  return { keys, args }
}

// Whether `b` can join `a`'s run: everything but the key is the same.
function sameRun(a: EvaluateRequest, b: EvaluateRequest): boolean {
  if (a.now !== b.now || a.cost !== b.cost) return false
  if (a.policies === b.policies) return true
  if (a.policies.length !== b.policies.length) return false
  for (let i = 0; i < a.policies.length; i++) if (a.policies[i] !== b.policies[i]) return false
  return true
}

// The reply's layout (see runner.lua): the server clock as a little-endian double, then per request
// a byte allowed (1/0) and per policy a byte of flags and four little-endian doubles.
const CLOCK_BYTES = 8
const REQUEST_BYTES = 1
const POLICY_BYTES = 1 + 4 * 8
const REPLY_ALLOWED = 1
const REPLY_BLOCKED = 2

/** What the script answers after the server clock (8 bytes) when the call's deadline had passed. */
const EXPIRED_REPLY = 'expired'

/** The server clock a reply starts with (ms), or undefined if it is not a reply of the script. */
export function readServerClock(reply: unknown): number | undefined {
  return Buffer.isBuffer(reply) && reply.length >= CLOCK_BYTES ? reply.readDoubleLE(0) : undefined
}

/**
 * Splits the script's binary reply into one response per request, in the call's order. A call
 * that reached the server after its deadline throws STORE_TIMEOUT: nothing was charged.
 */
export function decodeReply(reply: unknown, requests: readonly CallRequest[]): EvaluateResponse[] {
  if (!Buffer.isBuffer(reply)) throw new Error(`RedisStore: unexpected script reply ${JSON.stringify(reply)}`)
  if (reply.length === CLOCK_BYTES + EXPIRED_REPLY.length && reply.toString('latin1', CLOCK_BYTES) === EXPIRED_REPLY) {
    throw pastDeadline('reached Redis')
  }
  let expected = CLOCK_BYTES
  for (const { request } of requests) expected += REQUEST_BYTES + POLICY_BYTES * request.policies.length
  if (reply.length !== expected) throw new Error(`RedisStore: script reply has ${reply.length} bytes, expected ${expected}`)
  const serverNow = reply.readDoubleLE(0)
  // Arrays of their final size: an empty array grows a backing store for 16 on its first push.
  const responses = new Array<EvaluateResponse>(requests.length)
  let at = CLOCK_BYTES
  for (let r = 0; r < requests.length; r++) {
    const request = requests[r].request
    const allowed = reply[at] === 1
    at += REQUEST_BYTES
    const results = new Array<PolicyResult>(request.policies.length)
    for (let i = 0; i < results.length; i++) {
      const flags = reply[at]
      results[i] = {
        allowed: (flags & REPLY_ALLOWED) !== 0,
        remaining: reply.readDoubleLE(at + 1),
        resetMs: reply.readDoubleLE(at + 9),
        retryAfterMs: reply.readDoubleLE(at + 17),
        delayMs: reply.readDoubleLE(at + 25),
        blocked: (flags & REPLY_BLOCKED) !== 0,
      }
      at += POLICY_BYTES
    }
    responses[r] = { allowed, results, now: request.now ?? serverNow }
  }
  return responses
}

/**
 * The answer to a decision that was not applied because its caller had stopped waiting when it
 * `where` (reached Redis, or was about to be sent).
 */
export function pastDeadline(where: string): FloodgateError {
  return new FloodgateError(
    'STORE_TIMEOUT',
    `the decision ${where} after its caller stopped waiting (Redis was connecting, paused or overloaded), so it was not applied; ` +
      "the limiter answered with its onStoreError mode. Check Redis's latency, or raise the limiter's timeout option",
  )
}
