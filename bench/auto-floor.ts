// The floor row of bench/auto.ts: what the load itself costs Node, with a decision that takes no
// store, lease or heat (a count per key in a Map, and a Decision as complete as Floodgate's). No
// contender that decides through a RateLimiter can be faster in that bench.

import type { RateLimiter } from '../packages/floodgate/src/index.js'
import { floorDecision } from './support.js'

/** A stand-in for a RateLimiter, with what bench/auto.ts asks of one. */
export function floorLimiter(): RateLimiter {
  const counts = new Map<string, { count: number }>()
  const limiter = {
    async limit(key: string) {
      let entry = counts.get(key)
      if (entry === undefined) counts.set(key, (entry = { count: 0 }))
      const decision = floorDecision(entry, Date.now())
      // Counted as answered in-process, which it is.
      decision.source = 'lease'
      return decision
    },
    syncState: () => ({ leases: undefined }),
    flush: async () => {},
    close: async () => {},
  }
  return limiter as unknown as RateLimiter
}
