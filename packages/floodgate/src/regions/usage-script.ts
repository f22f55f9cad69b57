// Runs usage.lua (the merge of one usage hash) on a Redis connection, and the hash's key layout.

import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import type { Policy } from '../core/policy.js'
import type { Connection } from '../stores/redis/connection.js'
import { escapeKeyPart } from '../stores/redis/keys.js'
import { keySlot } from '../stores/redis/slot.js'

/** What one merge sends: this process's cumulative entries, shared fields to merge by maximum, and whether to claim. */
export interface MergeArgs {
  /** This region's name; '' when merging into a peer's hash (no process entries, no claims there). */
  region: string
  origin: string
  /** Process entries as (sub, cumulative): `u`, `d` or `g|<to>`. */
  entries: readonly (readonly [string, number])[]
  /** Shared fields (u|, d|, g|) to merge by maximum. */
  fields: ReadonlyMap<string, number>
  claim: boolean
  ttlMs: number
}

/** What a merge answers: units newly claimed, and the hash's shared fields after it. */
export interface MergeReply {
  claimed: number
  fields: Map<string, number>
}

let cached: { source: string; sha: string } | undefined

function script(): { source: string; sha: string } {
  if (cached === undefined) {
    const source = readFileSync(fileURLToPath(new URL('./usage.lua', import.meta.url)), 'utf8')
    cached = { source, sha: createHash('sha1').update(source).digest('hex') }
  }
  return cached
}

/**
 * The usage hash of one (key, policy, window): in the key's hash-tag slot, beside the policy's
 * state (`prefix{key}:policy:rg:window`), so a Cluster keeps a key's usage with its state.
 */
export function usageKey(prefix: string, key: string, policy: Policy, window: number): string {
  return `${prefix}{${escapeKeyPart(key)}}:${escapeKeyPart(policy.name)}:rg:${window}`
}

/** One hash to merge into, and what to merge. */
export interface MergeItem {
  readonly hashKey: string
  readonly merge: MergeArgs
}

/** Most hashes in one script call, so one call never holds Redis for long (well under a millisecond). */
const MAX_PER_CALL = 64
/** Merge calls in flight at once on a Cluster (one call per slot there, so many small ones). */
const CLUSTER_CALLS_IN_FLIGHT = 8

/** Merges into one usage hash atomically (EVALSHA, then EVAL once if the server lacks the script). */
export async function mergeUsage(connection: Connection, hashKey: string, merge: MergeArgs): Promise<MergeReply> {
  return (await mergeUsageBatch(connection, merge.region, [{ hashKey, merge }]))[0]
}

/**
 * Merges into many usage hashes, each atomically, in as few script calls as the server allows: up
 * to MAX_PER_CALL hashes per call, and on a Cluster one call per slot (a script's keys must share
 * one). At most `inFlight` calls at once: by default one (a few on a Cluster, whose slots spread
 * over nodes), because the region's connection is the one decisions use, and a burst of merge calls
 * written at once would hold every decision behind all of them. A peer's link, far away and used
 * by nothing else, takes many at once, so a tick costs about one round trip, not one per call.
 * Every item's `merge.region` must be `region`. Replies come in the items' order.
 */
export async function mergeUsageBatch(
  connection: Connection,
  region: string,
  items: readonly MergeItem[],
  inFlight = connection.isCluster ? CLUSTER_CALLS_IN_FLIGHT : 1,
): Promise<MergeReply[]> {
  const groups = new Map<number | string, number[]>()
  items.forEach((item, index) => {
    const group = connection.isCluster ? keySlot(item.hashKey) : Math.floor(index / MAX_PER_CALL)
    let members = groups.get(group)
    if (members === undefined) groups.set(group, (members = []))
    members.push(index)
  })
  const replies: MergeReply[] = new Array(items.length)
  const calls = [...groups.values()].flatMap((group) => chunks(group, MAX_PER_CALL))
  let next = 0
  const worker = async (): Promise<void> => {
    while (next < calls.length) {
      const members = calls[next++]
      const keys: string[] = []
      const args: string[] = [region]
      for (const index of members) {
        const { hashKey, merge } = items[index]
        keys.push(hashKey)
        args.push(String(Math.max(1, Math.ceil(merge.ttlMs))), merge.origin, String(merge.entries.length))
        for (const [sub, cumulative] of merge.entries) args.push(sub, String(cumulative))
        args.push(String(merge.fields.size))
        for (const [field, value] of merge.fields) args.push(field, String(value))
        args.push(merge.claim ? '1' : '0')
      }
      const reply = await runScript(connection, keys, args)
      if (!Array.isArray(reply) || reply.length !== members.length) {
        throw new Error(`usage.lua answered ${String(reply)}; expected one reply per hash`)
      }
      members.forEach((index, j) => (replies[index] = decodeReply(reply[j])))
    }
  }
  await Promise.all(Array.from({ length: Math.max(1, inFlight) }, worker))
  return replies
}

async function runScript(connection: Connection, keys: readonly string[], args: readonly string[]): Promise<unknown> {
  const { source, sha } = script()
  try {
    return await connection.evalBuffer('evalsha', sha, keys, args)
  } catch (error) {
    if (!(error instanceof Error && error.message.startsWith('NOSCRIPT'))) throw error
    return await connection.evalBuffer('eval', source, keys, args)
  }
}

function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = []
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size))
  return out
}

function decodeReply(reply: unknown): MergeReply {
  if (!Array.isArray(reply) || reply.length % 2 !== 1) {
    throw new Error(`usage.lua answered ${String(reply)}; expected { claimed, field, value, ... }`)
  }
  const fields = new Map<string, number>()
  for (let i = 1; i < reply.length; i += 2) fields.set(String(reply[i]), Number(String(reply[i + 1])))
  return { claimed: Number(reply[0]), fields }
}
