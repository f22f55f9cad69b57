// `npm run bench:memcached-swap`: decisions/s of MemcachedStore on three local memcached servers with the list fixed,
// side by side with the same store while its list changes every BENCH_SWAP_MS (three servers, then two, and back:
// what MEMCACHE_SRV_REFRESH does when the record changes), 256 concurrent callers over 10k keys. Every decision must
// come from memcached: a swap may lose none. Not a test: numbers only, printed as tables.
//
// Environment knobs: BENCH_ROUNDS (default 5), BENCH_ROUND_MS (default 1500 per contender and round),
// BENCH_SWAP_MS (default 50).

import { RateLimiter } from '../packages/floodgate/src/index.js'
import { MemcachedStore } from '../packages/floodgate/src/memcached.js'
import { startMemcached } from '../packages/floodgate/test/support/memcached-server.js'
import { formatCount, printRoundsAgainstFirst, roundsContender, Tallies, type Contender } from './support.js'

const CALLERS = 256
const KEYS = 10_000
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5)
const ROUND_MS = Number(process.env.BENCH_ROUND_MS ?? 1500)
const SWAP_MS = Number(process.env.BENCH_SWAP_MS ?? 50)
// Every decision admitted: both contenders do the same writing work.
const LIMIT = 1_000_000_000

const tallies = new Tallies()
const keyOf = (round: string, i: number): string => `${round}:${(i * 7919) % KEYS}`

async function main(): Promise<void> {
  const servers = await Promise.all([startMemcached(), startMemcached(), startMemcached()])
  const all = servers.map((server) => server.address)
  const stores: MemcachedStore[] = []
  try {
    console.log(`Floodgate memcached swap bench: 3 memcached (-t 2) on ${all.join(', ')}`)
    console.log(`${CALLERS} concurrent callers, ${formatCount(KEYS)} keys, ${ROUNDS} interleaved rounds of ${ROUND_MS}ms`)
    const contender = (name: string, swapping: boolean): Contender => {
      const store = new MemcachedStore({ servers: all, memjs: { timeout: 5 } })
      stores.push(store)
      const limiter = new RateLimiter({ store, policies: [{ algorithm: 'fixed-window', limit: LIMIT, period: '1h' }], timeout: '5s' })
      const measured = roundsContender(
        name,
        { callers: CALLERS, durationMs: ROUND_MS, maxOps: 2_000_000 },
        tallies,
        name,
        async (prefix, i) => {
          const decision = await limiter.limit(keyOf(prefix, i))
          if (decision.source !== 'store') throw new Error(`decision came from ${decision.source}`)
          return decision
        },
        (decision) => !decision.allowed,
      )
      if (!swapping) return measured
      let swaps = 0
      return {
        name,
        async measure() {
          const timer = setInterval(() => {
            swaps++
            void store.setServers(swaps % 2 === 1 ? all.slice(0, 2) : all)
          }, SWAP_MS)
          try {
            return await measured.measure()
          } finally {
            clearInterval(timer)
            await store.setServers(all)
          }
        },
      }
    }
    const contenders = [contender('3 servers, list fixed', false), contender(`list changed every ${SWAP_MS}ms (3 ↔ 2)`, true)]
    await printRoundsAgainstFirst(contenders, ROUNDS, 'fixed', tallies)
  } finally {
    for (const store of stores) await store.close()
    await Promise.all(servers.map((server) => server.stop()))
  }
}

main().catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
