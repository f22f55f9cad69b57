// Runs usage.lua (the merge of one usage hash) on a Redis connection, and the hash's key layout.

import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import type { Policy } from '../core/policy.js'
import type { Connection } from '../stores/redis/connection.js'
import { escapeKeyPart } from '../stores/redis/keys.js'

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

/** Merges into one usage hash atomically (EVALSHA, then EVAL once if the server lacks the script). */
export async function mergeUsage(connection: Connection, hashKey: string, merge: MergeArgs): Promise<MergeReply> {
  const args: string[] = [String(Math.max(1, Math.ceil(merge.ttlMs))), merge.region, merge.origin, String(merge.entries.length)]
  for (const [sub, cumulative] of merge.entries) args.push(sub, String(cumulative))
  for (const [field, value] of merge.fields) args.push(field, String(value))
  args.push(merge.claim ? '1' : '0')
  const { source, sha } = script()
  let reply: unknown
  try {
    reply = await connection.evalBuffer('evalsha', sha, [hashKey], args)
  } catch (error) {
    if (!(error instanceof Error && error.message.startsWith('NOSCRIPT'))) throw error
    reply = await connection.evalBuffer('eval', source, [hashKey], args)
  }
  return decodeReply(reply)
}

function decodeReply(reply: unknown): MergeReply {
  if (!Array.isArray(reply) || reply.length % 2 !== 1) throw new Error(`usage.lua answered ${String(reply)}; expected { claimed, field, value, ... }`)
  const fields = new Map<string, number>()
  for (let i = 1; i < reply.length; i += 2) fields.set(String(reply[i]), Number(String(reply[i + 1])))
  return { claimed: Number(reply[0]), fields }
}
