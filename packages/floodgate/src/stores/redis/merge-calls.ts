// RedisStore.merge's calls: a batch of merge requests grouped per server (per Cluster master), each
// group sent as merge-runner.lua calls of at most maxBatchSize requests.

import { FloodgateError } from '../../core/errors.js'
import type { MergeRequest, MergeResponse } from '../store.js'
import { mergeRequestProblem } from '../merge-request.js'
import type { Connection } from './connection.js'
import { unavailable } from './connection-gate.js'
import { policyKey } from './keys.js'
import { decodeMergeReply, encodeMergeCall, type MergeCallRequest } from './merge-codec.js'
import { runMerger } from './merger-script.js'
import { keySlot } from './slot.js'

interface Item extends MergeCallRequest {
  /** The request's place in the batch, where its response goes. */
  readonly index: number
}

/**
 * Merges `batch` (see Store.merge): refused whole if a request is bad or Redis is not connected;
 * rejected if any call fails (a merge with origin and seq may then be sent again: what a failed call
 * applied is not applied twice).
 */
export async function mergeOnRedis(
  connection: Connection,
  prefix: string,
  batch: readonly MergeRequest[],
  maxBatchSize: number,
): Promise<MergeResponse[]> {
  if (!Array.isArray(batch as unknown)) throw new FloodgateError('INVALID_REQUEST', 'batch must be an array of merge requests')
  for (const request of batch) {
    const problem = mergeRequestProblem(request)
    if (problem !== undefined) throw new FloodgateError('INVALID_REQUEST', problem)
  }
  if (batch.length === 0) return []
  if (!connection.isReady()) throw unavailable(connection.status())
  const items: Item[] = batch.map((request, index) => {
    const keys = request.policies.map((policy) => policyKey(prefix, request.key, policy))
    return { request, keys, slot: connection.isCluster ? keySlot(keys[0]) : -1, index }
  })
  const groups = new Map<string, Item[]>()
  for (const item of items) {
    const server = connection.isCluster ? (connection.masterOf(item.slot) ?? `slot ${item.slot}`) : ''
    const group = groups.get(server)
    if (group === undefined) groups.set(server, [item])
    else group.push(item)
  }
  const responses = new Array<MergeResponse>(batch.length)
  const calls: Promise<void>[] = []
  for (const group of groups.values()) {
    // Each slot's requests together (one MGET each), then cut into calls.
    group.sort((a, b) => a.slot - b.slot || a.index - b.index)
    for (let from = 0; from < group.length; from += maxBatchSize) {
      calls.push(mergeCall(connection, prefix, group.slice(from, from + maxBatchSize), responses))
    }
  }
  await Promise.all(calls)
  return responses
}

async function mergeCall(connection: Connection, prefix: string, items: Item[], responses: MergeResponse[]): Promise<void> {
  let declared = 0
  while (declared < items.length && items[declared].slot === items[0].slot) declared++
  const { keys, args } = encodeMergeCall(items, declared, prefix)
  let reply: unknown
  try {
    reply = await runMerger(connection, keys, args)
  } catch (error) {
    // The slot map changed under a call of several slots: the script read every record before
    // writing anything, so each slot goes alone (declared keys only, which the client redirects).
    if (declared === items.length || !isRoutingError(error)) throw error
    const slots = new Map<number, Item[]>()
    for (const item of items) slots.set(item.slot, [...(slots.get(item.slot) ?? []), item])
    await Promise.all([...slots.values()].map((group) => mergeCall(connection, prefix, group, responses)))
    return
  }
  const decoded = decodeMergeReply(reply, items)
  for (let i = 0; i < items.length; i++) responses[items[i].index] = decoded[i]
}

function isRoutingError(error: unknown): boolean {
  return error instanceof Error && /non local key|CROSSSLOT|same slot/.test(error.message)
}
