// Split mode's asks: a region short of units leaves the (key, policy, window) and its need in a list on each peer's Redis.
//
// A peer only looks at keys it decides or is asked about, so a region whose clients moved to
// another region would never notice that region's demand without being told. The ask says where
// to look and how many units the asker wants from this peer for the next horizon (demand.ts); the
// peer keeps it for a short while (AskBook), and the asker sends it again every exchange while
// it stays short.

import { createPolicy, type Policy } from '../core/policy.js'
import type { Connection } from '../stores/redis/connection.js'
import type { HandOverAsk } from './allotments.js'

/** One (key, policy, window) a region is short of units for. */
export interface Ask {
  key: string
  policy: Policy
  window: number
  /**
   * Who asks and for what: absent in an ask of an older version, which only says where to look
   * (the peer then reads the shortfall off the usage hash).
   */
  from?: string
  need?: number
  known?: number
}

/** The most asks a list keeps (older ones drop off), and the most taken per tick. */
const MAX_QUEUED = 10_000
const MAX_TAKEN = 1_000

/** The list of asks waiting for `region` (one key, so one Cluster slot). */
export function askKey(prefix: string, region: string): string {
  return `${prefix}rg-asks:{${region}}`
}

const PUSH =
  `redis.call('RPUSH', KEYS[1], unpack(ARGV)) redis.call('LTRIM', KEYS[1], -${MAX_QUEUED}, -1) ` +
  `redis.call('PEXPIRE', KEYS[1], 600000) return 1`
const POP = `local items = redis.call('LRANGE', KEYS[1], 0, ${MAX_TAKEN - 1}) redis.call('LTRIM', KEYS[1], ${MAX_TAKEN}, -1) return items`

/** Leaves `asks` for a peer (at most MAX_TAKEN per call). */
export async function pushAsks(connection: Connection, listKey: string, asks: readonly Ask[]): Promise<void> {
  const items = asks
    .slice(0, MAX_TAKEN)
    .map((ask) =>
      JSON.stringify([
        ask.key,
        ask.policy.name,
        ask.policy.algorithm,
        ask.policy.limit,
        ask.policy.periodMs,
        ask.window,
        ask.from,
        ask.need,
        ask.known,
      ]),
    )
  await connection.evalBuffer('eval', PUSH, [listKey], items)
}

/** Takes the asks left for this region; malformed ones are skipped. */
export async function popAsks(connection: Connection, listKey: string): Promise<Ask[]> {
  const reply = await connection.evalBuffer('eval', POP, [listKey], [])
  const asks: Ask[] = []
  if (!Array.isArray(reply)) return asks
  for (const item of reply) {
    const ask = parseAsk(String(item))
    if (ask !== undefined) asks.push(ask)
  }
  return asks
}

function parseAsk(text: string): Ask | undefined {
  try {
    const [key, name, algorithm, limit, periodMs, window, from, need, known] = JSON.parse(text) as unknown[]
    if (typeof key !== 'string' || typeof window !== 'number' || !Number.isInteger(window)) return undefined
    const policy = createPolicy({
      name: name as string,
      algorithm: algorithm as Policy['algorithm'],
      limit: limit as number,
      period: periodMs as number,
      regions: 'split',
    })
    if (typeof from !== 'string' || !isCount(need) || !isCount(known)) return { key, policy, window }
    return { key, policy, window, from, need, known }
  } catch {
    return undefined
  }
}

function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0
}

/** Most entries whose asks are kept; past it the entry asked about least recently is forgotten (it is asked again). */
const MAX_ASKED_ENTRIES = 10_000

/**
 * The asks this process took from its list, by entry and asking region, each until `ttlMs` after
 * it was taken: the asker sends a fresh one every exchange while it stays short, so an ask that
 * is not renewed means the asker no longer needs units (or cannot say so), and it lapses.
 */
export class AskBook {
  private readonly byEntry = new Map<string, Map<string, HandOverAsk & { at: number }>>()

  constructor(private readonly ttlMs: number) {}

  /** Keeps `ask` from `from` for entry `id`, taken at `at` (a newer ask from the same region replaces it). */
  note(id: string, from: string, ask: HandOverAsk, at: number): void {
    let asks = this.byEntry.get(id)
    if (asks === undefined) {
      if (this.byEntry.size >= MAX_ASKED_ENTRIES) this.byEntry.delete(this.byEntry.keys().next().value!)
      asks = new Map()
    } else {
      this.byEntry.delete(id)
    }
    this.byEntry.set(id, asks)
    asks.set(from, { need: ask.need, known: ask.known, at })
  }

  /** The live asks for entry `id` at `now`, by asking region; lapsed ones are dropped on the way. */
  live(id: string, now: number): ReadonlyMap<string, HandOverAsk> | undefined {
    const asks = this.byEntry.get(id)
    if (asks === undefined) return undefined
    for (const [from, ask] of asks) if (now - ask.at > this.ttlMs) asks.delete(from)
    if (asks.size === 0) {
      this.byEntry.delete(id)
      return undefined
    }
    return asks
  }
}
