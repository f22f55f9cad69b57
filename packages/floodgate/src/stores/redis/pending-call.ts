// The requests in RedisStore's script calls: their types and checks, and how they are grouped per
// server, encoded, expired and answered. Plain functions of redis-store.ts's submit path, moved as they were.

import { FloodgateError } from '../../core/errors.js'
import type { EvaluateRequest, EvaluateResponse, SubmitCallback } from '../store.js'
import { decodeReply, encodeCall, pastDeadline, type CallRequest } from './batch-codec.js'
import type { Connection } from './connection.js'
import type { ServerClock } from './server-clock.js'

export interface Pending extends CallRequest {
  /** Called once: `(null, response)` or `(error)`. */
  readonly done: SubmitCallback
}

/** A merge waiting for the connection gate: sent, or refused. */
export interface GatedMerge {
  run(): void
  refuse(error: Error): void
}

/** One script call, encoded: its requests in the order the script decides them. */
export interface Call {
  readonly items: Pending[]
  /** How many of `items` (from the first) have their keys declared in KEYS: the routing slot's. */
  readonly declared: number
  readonly keys: string[]
  readonly args: string[]
}

// Standalone/Sentinel: one group. Cluster: one group per master as the client last saw the slot
// map (per slot while it has none yet).
export function groupByServer(connection: Connection, items: Pending[]): Map<string, Pending[]> {
  if (!connection.isCluster) return new Map([['', items]])
  return groupBy(items, (item) => connection.masterOf(item.slot) ?? `slot ${item.slot}`)
}

// Orders and encodes `items` for one call; undefined (each item rejected) if they cannot be encoded.
export function prepareCall(items: Pending[], clock: ServerClock): Call | undefined {
  const ordered = slotsTogether(items)
  const declared = ordered.filter((item) => item.slot === ordered[0].slot).length
  try {
    const { keys, args } = encodeCall(ordered, declared, clock.earliest(ordered, deadlineOf))
    return { items: ordered, declared, keys, args }
  } catch (error) {
    for (const item of ordered) answer(item, error)
    return undefined
  }
}

// Answers each request of `call` from its reply, or each with the error of decoding it.
export function answerAll(call: Call, reply: unknown): void {
  let responses: EvaluateResponse[]
  try {
    responses = decodeReply(reply, call.items)
  } catch (error) {
    for (const item of call.items) answer(item, error)
    return
  }
  for (let i = 0; i < call.items.length; i++) answer(call.items[i], null, responses[i])
}

export function nothing(): void {}

function deadlineOf(item: Pending): number | undefined {
  return item.request.deadline
}

export function hasDeadline(item: Pending): boolean {
  return item.request.deadline !== undefined
}

// `items` but those whose deadline has passed, which are answered STORE_TIMEOUT. The limiter's
// timeout answers a caller once its deadline is reached, so such a call would charge what no caller
// was told about. The same array when none has passed (the usual case).
export function unexpired(items: Pending[]): Pending[] {
  const now = performance.now()
  let live = items
  let error: FloodgateError | undefined
  for (let i = 0; i < items.length; i++) {
    const deadline = items[i].request.deadline
    if (deadline === undefined || deadline > now) {
      if (live !== items) live.push(items[i])
      continue
    }
    if (live === items) live = items.slice(0, i)
    error ??= pastDeadline('was about to be sent to Redis')
    answer(items[i], error)
  }
  return live
}

// Calls a request's callback. A callback that throws must not keep the rest of its call from their
// answers: its error is thrown again on its own, as an uncaught exception of the caller's.
export function answer(item: Pending, error: unknown, response?: EvaluateResponse): void {
  try {
    item.done(error, response)
  } catch (thrown) {
    queueMicrotask(() => {
      throw thrown
    })
  }
}

export function requestProblem(request: EvaluateRequest): string | undefined {
  if (request === null || typeof request !== 'object') return 'each request must be an object { key, policies, cost }'
  if (typeof request.key !== 'string') return `key must be a string, got ${typeof request.key}`
  if (!Array.isArray(request.policies) || request.policies.length === 0)
    return `key ${JSON.stringify(request.key)}: give at least one policy`
  if (typeof request.cost !== 'number' || !Number.isFinite(request.cost)) return `cost must be a finite number, got ${String(request.cost)}`
  if (request.now !== undefined && (typeof request.now !== 'number' || !Number.isFinite(request.now))) {
    return `now must be a finite number of milliseconds, got ${String(request.now)}`
  }
  return undefined
}

// Groups by key in first-seen order, keeping each group's items in their original order.
export function groupBy<T, K>(items: readonly T[], keyOf: (item: T) => K): Map<K, T[]> {
  const groups = new Map<K, T[]>()
  for (const item of items) {
    const key = keyOf(item)
    const group = groups.get(key)
    if (group === undefined) groups.set(key, [item])
    else group.push(item)
  }
  return groups
}

// Each slot's requests next to each other (one read group each), the first item's slot first: it
// is the routing slot, whose keys are declared. Requests of one slot keep their order.
function slotsTogether(items: Pending[]): Pending[] {
  const slot = items[0].slot
  if (items.every((item) => item.slot === slot)) return items
  return [...groupBy(items, (item) => item.slot).values()].flat()
}

export function isRoutingError(error: unknown): boolean {
  return error instanceof Error && /non local key|CROSSSLOT|same slot/.test(error.message)
}

export function invalidRequest(message: string): FloodgateError {
  return new FloodgateError('INVALID_REQUEST', message)
}
