// Lease calls on Redis: batched per event-loop turn, one script call per slot, encoded and decoded here.

import { FloodgateError } from '../../core/errors.js'
import type { PolicyResult } from '../../core/evaluate.js'
import type { Policy } from '../../core/policy.js'
import type { LeaseRequest, LeaseResponse } from '../store.js'
import { pastDeadline, readServerClock } from './batch-codec.js'
import { TickBatcher } from './batcher.js'
import type { Connection, ScriptArgument, Unsubscribe } from './connection.js'
import { ConnectionGate } from './connection-gate.js'
import { policyKey } from './keys.js'
import { runLeaseRunner } from './scripts.js'
import { ServerClock } from './server-clock.js'
import { keySlot } from './slot.js'

/** The key of a policy's lease ledger: its record's key and `#l`, so the same slot (see keys.ts: no record key ends so). */
export function ledgerKey(prefix: string, userKey: string, policy: Policy): string {
  return `${policyKey(prefix, userKey, policy)}#l`
}

interface Item {
  readonly request: LeaseRequest
  readonly keys: string[]
  readonly slot: number
  readonly resolve: (response: LeaseResponse) => void
  readonly reject: (error: unknown) => void
}

/**
 * Sends lease calls (lease-runner.lua): those of one event-loop turn together, one EVALSHA per slot
 * (every key of a call declared, so any Cluster routes it), at most `maxBatchSize` requests each.
 * Lease calls are rare next to decisions (one per block of units), so they need no lanes of their own.
 *
 * Deadlines as RedisStore's decisions have them: a call carries the earliest of its requests'
 * deadlines on its server's clock (learnt from the replies, one ServerClock per server), and the
 * script grants and charges nothing past it (a call that waited out a paused server); a request
 * whose deadline passed before it was sent is not sent. Either way it is answered STORE_TIMEOUT.
 */
export class LeaseCaller {
  // As decisions do: sent only over a live connection, waiting for the first one (connection-gate.ts).
  private readonly gate: ConnectionGate<Item>
  private readonly batcher = new TickBatcher<Item>((items) => this.gate.pass(items))
  // Each server's clock (Cluster: by master), learnt from the replies.
  private readonly clocks = new Map<string, ServerClock>()
  private readonly unsubscribe: Unsubscribe

  constructor(
    private readonly connection: Connection,
    private readonly prefix: string,
    private readonly maxBatchSize: number,
  ) {
    this.gate = new ConnectionGate(
      connection,
      (items) => this.flush(items),
      (items, error) => {
        for (const item of items) item.reject(error)
      },
    )
    // A new connection may reach another server (a Sentinel failover), with a clock of its own.
    this.unsubscribe = connection.onReady(() => this.clocks.forEach((clock) => clock.forget()))
  }

  /** Refuses what still waits for a first connection, and stops listening to the client (the store is closing). */
  detach(): void {
    this.gate.detach()
    this.unsubscribe()
  }

  lease(batch: readonly LeaseRequest[]): Promise<LeaseResponse[]> {
    return Promise.all(batch.map((request) => this.one(request)))
  }

  private one(request: LeaseRequest): Promise<LeaseResponse> {
    const problem = leaseProblem(request)
    if (problem !== undefined) return Promise.reject(new FloodgateError('INVALID_REQUEST', problem))
    const keys = [
      ...request.policies.map((policy) => policyKey(this.prefix, request.key, policy)),
      ...request.policies.map((policy) => ledgerKey(this.prefix, request.key, policy)),
    ]
    const slot = this.connection.isCluster ? keySlot(keys[0]) : -1
    return new Promise((resolve, reject) => this.batcher.add({ request, keys, slot, resolve, reject }))
  }

  private flush(items: Item[]): void {
    const bySlot = new Map<number, Item[]>()
    for (const item of items) {
      const group = bySlot.get(item.slot)
      if (group === undefined) bySlot.set(item.slot, [item])
      else group.push(item)
    }
    for (const group of bySlot.values()) {
      for (let from = 0; from < group.length; from += this.maxBatchSize) this.send(group.slice(from, from + this.maxBatchSize))
    }
  }

  private send(items: Item[]): void {
    const live = unexpired(items)
    if (live.length === 0) return
    const clock = this.clockOf(live[0].slot)
    if (!clock.known && live.some((item) => item.request.deadline !== undefined)) return this.learnClock(live, clock)
    const requests = live.map((item) => item.request)
    const { keys, args } = encodeLeaseCall(
      requests,
      live.flatMap((item) => item.keys),
      clock.earliest(requests, (request) => request.deadline),
    )
    runLeaseRunner(this.connection, keys, args).then(
      (reply) => {
        const serverNow = readServerClock(reply)
        if (serverNow !== undefined) clock.learn(serverNow, performance.now())
        let responses: LeaseResponse[]
        try {
          responses = decodeLeaseReply(reply, requests)
        } catch (error) {
          for (const item of live) item.reject(error)
          return
        }
        live.forEach((item, i) => item.resolve(responses[i]))
      },
      (error: unknown) => {
        for (const item of live) item.reject(error)
      },
    )
  }

  // The server's clock of a slot's calls (a standalone server's: one).
  private clockOf(slot: number): ServerClock {
    const server = this.connection.isCluster ? (this.connection.masterOf(slot) ?? `slot ${slot}`) : ''
    let clock = this.clocks.get(server)
    if (clock === undefined) {
      clock = new ServerClock()
      this.clocks.set(server, clock)
    }
    return clock
  }

  // Learns the server's clock before sending `items`, from a call with a deadline already passed (0),
  // which the script answers with its clock, reading and writing nothing: sent with no deadline
  // instead, a first call to a hung server would grant and charge when it resumes, long after its
  // caller was answered by its fallback. Routed by one of the items' keys, to their server.
  private learnClock(items: Item[], clock: ServerClock): void {
    runLeaseRunner(this.connection, [items[0].keys[0]], ['0']).then(
      (reply) => {
        const serverNow = readServerClock(reply)
        if (serverNow === undefined) {
          for (const item of items) item.reject(new Error(`Floodgate: unexpected lease reply ${String(reply)}`))
          return
        }
        clock.learn(serverNow, performance.now())
        this.send(items)
      },
      (error: unknown) => {
        for (const item of items) item.reject(error)
      },
    )
  }
}

// `items` but those whose deadline has passed, which are answered STORE_TIMEOUT: their callers were
// answered otherwise already.
function unexpired(items: Item[]): Item[] {
  const now = performance.now()
  const live: Item[] = []
  for (const item of items) {
    const deadline = item.request.deadline
    if (deadline === undefined || deadline > now) live.push(item)
    else item.reject(pastDeadline('was about to be sent to Redis'))
  }
  return live
}

/**
 * The script's keys and arguments for `requests` (see lease-runner.lua): the policies as text, each
 * once, and every request's numbers in one binary argument (little-endian doubles), which Lua
 * unpacks several times cheaper than it parses text. `deadline`: the call's, on the server's clock.
 */
export function encodeLeaseCall(
  requests: readonly LeaseRequest[],
  keys: string[],
  deadline?: number,
): { keys: string[]; args: ScriptArgument[] } {
  const index = new Map<Policy, number>()
  const policyArgs: string[] = []
  let doubles = 0
  for (const request of requests) doubles += REQUEST_NUMBERS + request.policies.length
  const numbers = Buffer.allocUnsafe(8 * doubles)
  let at = 0
  for (const request of requests) {
    at = numbers.writeDoubleLE(request.now ?? Number.NaN, at)
    at = numbers.writeDoubleLE(request.policies.length, at)
    for (const policy of request.policies) {
      let position = index.get(policy)
      if (position === undefined) {
        position = index.size
        index.set(policy, position)
        policyArgs.push(policy.algorithm, String(policy.limit), String(policy.periodMs), String(policy.burst))
      }
      at = numbers.writeDoubleLE(position, at)
    }
    at = numbers.writeDoubleLE(request.id, at)
    at = numbers.writeDoubleLE(request.want, at)
    at = numbers.writeDoubleLE(request.need, at)
    at = numbers.writeDoubleLE(request.leaseMs, at)
    at = numbers.writeDoubleLE(request.returnId, at)
    at = numbers.writeDoubleLE(request.returnUnused, at)
  }
  const args: ScriptArgument[] = [deadline === undefined ? '' : String(deadline), String(index.size), ...policyArgs]
  args.push(String(requests.length), numbers)
  return { keys, args }
}

// What lease-runner.lua answers after the clock to a call that came past its deadline.
const EXPIRED = 'expired'

/** A request's numbers besides its policy indexes: now (NaN: the server's clock), policy count, and the six of its ask. */
const REQUEST_NUMBERS = 8

/**
 * Decodes lease-runner.lua's binary reply into one response per request. A call that reached the
 * server after its deadline throws STORE_TIMEOUT: nothing was granted or charged.
 */
export function decodeLeaseReply(reply: unknown, requests: readonly LeaseRequest[]): LeaseResponse[] {
  if (!Buffer.isBuffer(reply) || reply.length < 8) throw new Error(`Floodgate: unexpected lease reply ${String(reply)}`)
  if (reply.length === 8 + EXPIRED.length && reply.toString('latin1', 8) === EXPIRED) throw pastDeadline('reached Redis')
  let at = 8
  return requests.map((request) => {
    const now = reply.readDoubleLE(at)
    const granted = reply.readDoubleLE(at + 8)
    const expiresAt = reply.readDoubleLE(at + 16)
    const returned = reply[at + 24] === 1
    const allowed = reply[at + 25] === 1
    at += 26
    const results: PolicyResult[] = request.policies.map(() => {
      const result = {
        allowed: reply[at] === 1,
        remaining: reply.readDoubleLE(at + 1),
        resetMs: reply.readDoubleLE(at + 9),
        retryAfterMs: reply.readDoubleLE(at + 17),
        delayMs: 0,
        blocked: false,
      }
      at += 25
      return result
    })
    return { granted, expiresAt, returned, allowed, results, now }
  })
}

// What is wrong with a request, or undefined; a bad one is refused before it reaches Redis.
function leaseProblem(request: LeaseRequest): string | undefined {
  if (request === null || typeof request !== 'object') return 'a lease request must be an object'
  if (typeof request.key !== 'string') return `key must be a string, got ${typeof request.key}`
  if (!Array.isArray(request.policies) || request.policies.length === 0) return 'policies must be a non-empty array'
  for (const field of ['id', 'want', 'need', 'leaseMs', 'returnId', 'returnUnused'] as const) {
    const value = request[field]
    if (typeof value !== 'number' || !Number.isSafeInteger(value)) return `${field} must be a whole number, got ${String(value)}`
  }
  if (request.now !== undefined && (typeof request.now !== 'number' || !Number.isFinite(request.now))) return 'now must be a finite number'
  return undefined
}
