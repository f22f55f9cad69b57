// `npm run bench:memcached-tls`: decisions/s of MemcachedStore on a plain memcached, side by side with the same store
// over TLS (`tls` option) on a memcached started with -Z, and with -Z requiring a client certificate (mTLS);
// one server each (-t 2), 256 concurrent callers over 10k keys, certificates made by openssl. Every decision must
// come from memcached. Not a test: numbers only, printed as tables.
//
// Environment knobs: BENCH_ROUNDS (default 5), BENCH_ROUND_MS (default 1500 per contender and round).

import { readFileSync } from 'node:fs'
import { RateLimiter } from '../packages/floodgate/src/index.js'
import { MemcachedStore, type MemcachedTlsOptions } from '../packages/floodgate/src/memcached.js'
import { startMemcached } from '../packages/floodgate/test/support/memcached-server.js'
import { makeTestCerts } from '../packages/floodgate-server/test/service/redis-tls-certs.js'
import { formatCount, printRoundsAgainstFirst, roundsContender, Tallies, type Contender } from './support.js'

const CALLERS = 256
const KEYS = 10_000
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5)
const ROUND_MS = Number(process.env.BENCH_ROUND_MS ?? 1500)
// Every decision admitted: each contender does the same writing work.
const LIMIT = 1_000_000_000

const tallies = new Tallies()
const keyOf = (round: string, i: number): string => `${round}:${(i * 7919) % KEYS}`

async function main(): Promise<void> {
  const certs = makeTestCerts()
  const files = (verify: number) =>
    `ssl_chain_cert=${certs.server.cert},ssl_key=${certs.server.key},ssl_ca_cert=${certs.ca},ssl_verify_mode=${verify}`
  const [plain, tls, mutual] = await Promise.all([
    startMemcached(),
    startMemcached(undefined, ['-Z', '-o', files(0)]),
    startMemcached(undefined, ['-Z', '-o', files(2)]),
  ])
  const ca = readFileSync(certs.ca, 'utf8')
  const stores: MemcachedStore[] = []
  try {
    console.log(`Floodgate memcached TLS bench: memcached ${plain.address} (plain), ${tls.address} (-Z), ${mutual.address} (-Z, mTLS)`)
    console.log(`${CALLERS} concurrent callers, ${formatCount(KEYS)} keys, ${ROUNDS} interleaved rounds of ${ROUND_MS}ms`)
    const contender = (name: string, address: string, options?: MemcachedTlsOptions): Contender => {
      const store = new MemcachedStore({ servers: [address], memjs: { timeout: 5 }, ...(options && { tls: options }) })
      stores.push(store)
      const limiter = new RateLimiter({ store, policies: [{ algorithm: 'fixed-window', limit: LIMIT, period: '1h' }], timeout: '5s' })
      return roundsContender(
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
    }
    const contenders = [
      contender('plain TCP', plain.address),
      contender('TLS', tls.address, { ca }),
      contender('TLS + client certificate', mutual.address, {
        ca,
        cert: readFileSync(certs.client.cert, 'utf8'),
        key: readFileSync(certs.client.key, 'utf8'),
      }),
    ]
    await printRoundsAgainstFirst(contenders, ROUNDS, 'plain', tallies)
  } finally {
    for (const store of stores) await store.close()
    await Promise.all([plain, tls, mutual].map((server) => server.stop()))
    certs.remove()
  }
}

main().catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
