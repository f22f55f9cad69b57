// bench:memory's five-in-one group: five limiters of different algorithms alive in one process, with
// prebuilt keys, as an app runs a login limiter on a fixed window beside an API limiter on GCRA and
// so on. Their calls share the limiter's and the store's call sites, which is what a process of one
// limiter never shows; rate-limiter-flexible and the floors run in the same process, on the same keys.

import { RateLimiterMemory } from 'rate-limiter-flexible'
import { RateLimiter, MemoryStore, type AlgorithmName } from '../packages/floodgate/src/index.js'
import { decisionLiteral, type Contender } from './support.js'
import { KEYS, OPS, policyFor } from './memory-options.js'
import { FIVE_FLOOR, FIVE_PREFIX, FIVE_RLF, FIVE_SYNC_FLOOR } from './memory-five-names.js'

export { FIVE_FLOOR, FIVE_PREFIX, FIVE_RLF, FIVE_SYNC_FLOOR }

/** The algorithms of the five limiters (those with a one-policy kernel). */
export const FIVE: AlgorithmName[] = ['fixed-window', 'sliding-window', 'token-bucket', 'leaky-bucket', 'gcra']
/** The group's name on the command line (--group). */
export const FIVE_GROUP = 'five'

/** The group's contender names, in table order. */
export function fiveNames(): string[] {
  return [
    ...FIVE.map((algorithm) => `${FIVE_PREFIX}floodgate ${algorithm} limit()`),
    ...FIVE.map((algorithm) => `${FIVE_PREFIX}floodgate ${algorithm} limitSync()`),
    ...FIVE.map((algorithm) => `${FIVE_PREFIX}store alone: MemoryStore.evaluateSync ${algorithm}`),
    FIVE_RLF,
    FIVE_FLOOR,
    FIVE_SYNC_FLOOR,
  ]
}

async function awaitKeys(keys: readonly string[], op: (key: string) => Promise<unknown>): Promise<number> {
  const start = performance.now()
  for (let i = 0; i < OPS; i++) await op(keys[i % KEYS])
  return (OPS * 1000) / (performance.now() - start)
}

function syncKeys(keys: readonly string[], op: (key: string) => unknown): number {
  const start = performance.now()
  for (let i = 0; i < OPS; i++) op(keys[i % KEYS])
  return (OPS * 1000) / (performance.now() - start)
}

/** Every contender of the group, made at once: all five limiters are alive before any is measured. */
export function fiveInOne(): Contender[] {
  const keys = Array.from({ length: KEYS }, (_, i) => `user:${i}`)
  const stores = FIVE.map(() => new MemoryStore({ maxKeys: KEYS * 2 }))
  const limiters = FIVE.map((algorithm, i) => new RateLimiter({ store: stores[i], policies: [policyFor(algorithm)] }))
  // A diagnostic, not a product path: each limiter's own store asked directly (its policies, as the
  // limiter passes them), with the limiter's layers (validation, breaker, decision object) left out.
  const storeAlone = stores.map((store, i) => {
    const policies = limiters[i].policies
    return (key: string) => store.evaluateSync({ key, policies, cost: 1 })
  })
  const rlf = new RateLimiterMemory({ points: 1_000_000_000, duration: 3600 })
  const counts = new Map<string, { count: number }>(keys.map((key) => [key, { count: 0 }]))
  const hit = (key: string) => {
    const entry = counts.get(key)!
    entry.count++
    return decisionLiteral(entry.count, Date.now())
  }
  const names = fiveNames()
  const measures: (() => number | Promise<number>)[] = [
    ...limiters.map((limiter) => () => awaitKeys(keys, (key) => limiter.limit(key))),
    ...limiters.map((limiter) => () => syncKeys(keys, (key) => limiter.limitSync(key))),
    ...storeAlone.map((decide) => () => syncKeys(keys, decide)),
    () => awaitKeys(keys, (key) => rlf.consume(key)),
    () => awaitKeys(keys, async (key) => hit(key)),
    () => syncKeys(keys, hit),
  ]
  return names.map((name, i) => ({ name, measure: async () => measures[i]() }))
}
