// Lease calls on Redis: batched per event-loop turn, one script call per slot, encoded and decoded here.

import { FloodgateError } from '../../core/errors.js'
import type { PolicyResult } from '../../core/evaluate.js'
import type { Policy } from '../../core/policy.js'
import type { LeaseRequest, LeaseResponse } from '../store.js'
import { TickBatcher } from './batcher.js'
import type { Connection } from './connection.js'
import { ConnectionGate } from './connection-gate.js'
import { policyKey } from './keys.js'
import { runLeaseRunner } from './scripts.js'
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
 */
export class LeaseCaller {
  // As decisions do: sent only over a live connection, waiting for the first one (connection-gate.ts).
  private readonly gate: ConnectionGate<Item>
  private readonly batcher = new TickBatcher<Item>((items) => this.gate.pass(items))

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
  }

  /** Refuses what still waits for a first connection (the store is closing). */
  detach(): void {
    this.gate.detach()
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
    const { keys, args } = encodeLeaseCall(
      items.map((item) => item.request),
      items.flatMap((item) => item.keys),
    )
    runLeaseRunner(this.connection, keys, args).then(
      (reply) => {
        let responses: LeaseResponse[]
        try {
          responses = decodeLeaseReply(
            reply,
            items.map((item) => item.request),
          )
        } catch (error) {
          for (const item of items) item.reject(error)
          return
        }
        items.forEach((item, i) => item.resolve(responses[i]))
      },
      (error: unknown) => {
        for (const item of items) item.reject(error)
      },
    )
  }
}

/** The script's keys and arguments for `requests` (see lease-runner.lua). */
export function encodeLeaseCall(requests: readonly LeaseRequest[], keys: string[]): { keys: string[]; args: string[] } {
  const index = new Map<Policy, number>()
  const policyArgs: string[] = []
  const requestArgs: string[] = [String(requests.length)]
  for (const request of requests) {
    requestArgs.push(request.now === undefined ? '' : String(request.now), String(request.policies.length))
    for (const policy of request.policies) {
      let at = index.get(policy)
      if (at === undefined) {
        at = index.size
        index.set(policy, at)
        policyArgs.push(policy.algorithm, String(policy.limit), String(policy.periodMs), String(policy.burst))
      }
      requestArgs.push(String(at))
    }
    requestArgs.push(
      String(request.id),
      String(request.want),
      String(request.need),
      String(request.leaseMs),
      String(request.returnId),
      String(request.returnUnused),
    )
  }
  return { keys, args: ['', String(index.size), ...policyArgs, ...requestArgs] }
}

/** Decodes lease-runner.lua's binary reply into one response per request. */
export function decodeLeaseReply(reply: unknown, requests: readonly LeaseRequest[]): LeaseResponse[] {
  if (!Buffer.isBuffer(reply) || reply.length < 8) throw new Error(`Floodgate: unexpected lease reply ${String(reply)}`)
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
