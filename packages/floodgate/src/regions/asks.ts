// Split mode's asks: a region short of units leaves the (key, policy, window) in a list on each peer's Redis.
//
// A peer only looks at keys it decides or is asked about, so a region whose clients moved to
// another region would never notice that region's demand without being told. The ask only says
// where to look; what to give is decided from the usage hash itself.

import { createPolicy, type Policy } from '../core/policy.js'
import type { Connection } from '../stores/redis/connection.js'

/** One (key, policy, window) a region is short of units for. */
export interface Ask {
  key: string
  policy: Policy
  window: number
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
    .map((ask) => JSON.stringify([ask.key, ask.policy.name, ask.policy.algorithm, ask.policy.limit, ask.policy.periodMs, ask.window]))
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
    const [key, name, algorithm, limit, periodMs, window] = JSON.parse(text) as unknown[]
    if (typeof key !== 'string' || typeof window !== 'number' || !Number.isInteger(window)) return undefined
    const policy = createPolicy({
      name: name as string,
      algorithm: algorithm as Policy['algorithm'],
      limit: limit as number,
      period: periodMs as number,
      regions: 'split',
    })
    return { key, policy, window }
  } catch {
    return undefined
  }
}
