// Encodes a batch of merge requests into one merge-runner.lua call (KEYS and ARGV) and decodes its binary reply.

import type { PolicyRecord } from '../../core/evaluate.js'
import type { Policy } from '../../core/policy.js'
import type { MergeRequest, MergeResponse } from '../store.js'
import type { ScriptArgument } from './connection.js'
import { tokenPrefix } from './slot-tags.js'

/** One merge request of a call, with its policy keys built (in the request's policy order). */
export interface MergeCallRequest {
  readonly request: MergeRequest
  readonly keys: readonly string[]
  /** Cluster slot of the request's keys (all share the hash tag); -1 on a standalone server. */
  readonly slot: number
}

/**
 * The arguments of one merge-runner.lua call for `requests`, ordered with each slot's requests
 * together: the first `declared` requests' keys go in KEYS (the routing slot's), the rest in ARGV.
 * Each request's numbers go in one binary argument (REQUEST_HEAD, then its policy indexes, as
 * little-endian doubles): Lua unpacks them several times cheaper than it parses text, and the call
 * carries one argument for them instead of several per request. Origins go as text, each once, and
 * each slot group's token prefix (`prefix`: the store's key prefix) and origins as text.
 */
export function encodeMergeCall(
  requests: readonly MergeCallRequest[],
  declared: number,
  prefix: string,
): { keys: string[]; args: ScriptArgument[] } {
  const keys: string[] = []
  const extraKeys: string[] = []
  const policyIndex = new Map<Policy, number>()
  const policyArgs: string[] = []
  const originIndex = new Map<string, number>()
  const groupSizes: number[] = []
  // Each group's token prefix (slot-tags.ts): a slot's requests share one token per origin.
  const groupTokens: string[] = []
  // Each group's origins (their indexes, space-separated): the tokens the script reads for it, named
  // here so that it need not scan the requests for them before reading.
  const groupOrigins: Set<number>[] = []
  let doubles = 0
  for (const { request } of requests) doubles += REQUEST_HEAD + request.policies.length
  const numbers = Buffer.allocUnsafe(8 * doubles)
  let at = 0
  for (let r = 0; r < requests.length; r++) {
    const { request, keys: requestKeys, slot } = requests[r]
    const target = r < declared ? keys : extraKeys
    for (const key of requestKeys) target.push(key)
    if (r === 0 || slot !== requests[r - 1].slot) {
      groupSizes.push(requestKeys.length)
      groupTokens.push(tokenPrefix(prefix, slot))
      groupOrigins.push(new Set())
    } else groupSizes[groupSizes.length - 1] += requestKeys.length
    let origin = 0
    if (request.origin !== undefined) {
      origin = originIndex.get(request.origin) ?? originIndex.size + 1
      originIndex.set(request.origin, origin)
      groupOrigins[groupOrigins.length - 1].add(origin)
    }
    at = numbers.writeDoubleLE(request.now ?? Number.NaN, at)
    at = numbers.writeDoubleLE(request.units, at)
    at = numbers.writeDoubleLE(origin, at)
    at = numbers.writeDoubleLE(request.seq ?? 0, at)
    at = numbers.writeDoubleLE(request.policies.length, at)
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
      at = numbers.writeDoubleLE(index, at)
    }
  }
  const args: ScriptArgument[] = [
    String(extraKeys.length),
    ...extraKeys,
    String(policyIndex.size),
    ...policyArgs,
    String(groupSizes.length),
    ...groupSizes.map(String),
    ...groupTokens,
    ...groupOrigins.map((origins) => [...origins].join(' ')),
    String(requests.length),
    String(originIndex.size),
    ...originIndex.keys(),
    numbers,
  ]
  return { keys, args }
}

/** A request's numbers before its policy indexes: now (NaN: the server's clock), units, origin (0: none), seq, policy count. */
const REQUEST_HEAD = 5

const CLOCK_BYTES = 8
/** A record's tags (record.lua): a state and no block, a state and a block, a block alone. */
const TAG_S = 0x53
const TAG_B = 0x42
const TAG_N = 0x4e

/** Splits merge-runner.lua's reply into one response per request, in the call's order. */
export function decodeMergeReply(reply: unknown, requests: readonly MergeCallRequest[]): MergeResponse[] {
  if (!Buffer.isBuffer(reply) || reply.length < CLOCK_BYTES) throw new Error(`RedisStore: unexpected merge reply ${JSON.stringify(reply)}`)
  const serverNow = reply.readDoubleLE(0)
  const responses = new Array<MergeResponse>(requests.length)
  let at = CLOCK_BYTES
  for (let r = 0; r < requests.length; r++) {
    const request = requests[r].request
    const now = request.now ?? serverNow
    const applied = reply[at] === 1
    at += 1
    const records = new Array<PolicyRecord>(request.policies.length)
    for (let i = 0; i < records.length; i++) {
      const length = reply.readUInt16LE(at)
      at += 2
      records[i] = length === 0 ? { blockedUntil: 0, state: undefined } : decodeRecord(reply, at, length, now)
      at += length
    }
    responses[r] = { records, applied, now }
  }
  if (at !== reply.length) throw new Error(`RedisStore: merge reply has ${reply.length} bytes, expected ${at}`)
  return responses
}

/**
 * The record.lua text of `length` bytes at `at`: its state and its block, which counts only while it
 * lasts (after `now`), as the scripts read it. The expiry after the tag is the key's, not the state's.
 */
function decodeRecord(reply: Buffer, at: number, length: number, now: number): PolicyRecord {
  const tag = reply[at]
  let from = at + 9
  let blockedUntil = 0
  if (tag === TAG_B || tag === TAG_N) {
    blockedUntil = reply.readDoubleLE(from)
    from += 8
    if (blockedUntil <= now) blockedUntil = 0
  } else if (tag !== TAG_S) throw new Error(`RedisStore: merge reply holds a record tagged ${tag}`)
  if (tag === TAG_N) return { blockedUntil, state: undefined }
  const count = (at + length - from) / 8
  const state = new Array<number>(count)
  for (let j = 0; j < count; j++) state[j] = reply.readDoubleLE(from + 8 * j)
  return { blockedUntil, state }
}
