// `node --conditions=floodgate-source --import tsx bench/redis-lua-ab.ts [base-rev]`: Redis CPU per
// decision of the runner script of this tree against the runner of `base-rev` (default main), on
// the same traffic in one sitting. Run it under `flock /tmp/floodgate-bench.lock`.
//
// Why beside bench:redis: there the client, the event loop and the other contenders share two
// cores with Redis, and a Lua change of a few percent drowns in the machine's drift. Here one store
// sends the same requests throughout, and each EVALSHA is pointed at one script or the other in
// alternating blocks; Redis's own CPU counters (used_cpu_user + used_cpu_sys) are read around each
// block. Both scripts take the same KEYS and ARGV (only the algorithms' insides may differ).
//
// Blocks go A B, B A, A B, …; their count is even, so that each side's median falls at the same mean
// position in the run: a state that grows all run long (sliding-log's log) costs more block after
// block, and with an odd count one side's median is one block later (this tree against itself read
// 1.086x on sliding-log with 9 blocks).
//
// Knobs: AB_BLOCKS (blocks per script, even, default 10), AB_DECISIONS (per block, default 100 000),
// AB_POLICIES (policies per key, default 1: the runner's one-policy path; 2 adds a second policy of
// the same algorithm over twice the period, so every decision goes through evaluate.lua instead).

import { createHash } from 'node:crypto'
import { Redis } from 'ioredis'
import { RateLimiter } from '../packages/floodgate/src/index.js'
import { RedisStore } from '../packages/floodgate/src/redis.js'
import type { AlgorithmName, PolicyOptions } from '../packages/floodgate/src/core/policy.js'
import { assembleRunner, runnerScript } from '../packages/floodgate/src/stores/redis/scripts.js'
import { startRedis } from '../packages/floodgate/test/support/redis-server.js'
import { generateThisTree, revisionScripts } from './revision-scripts.js'
import { median, printTable } from './support.js'

const BASE = process.argv[2] ?? 'main'
const BLOCKS = Number(process.env.AB_BLOCKS ?? 10)
if (BLOCKS % 2 !== 0) throw new Error(`AB_BLOCKS must be even (${BLOCKS}): see the top of this file`)
const DECISIONS = Number(process.env.AB_DECISIONS ?? 100_000)
const POLICIES = Number(process.env.AB_POLICIES ?? 1)
const CALLERS = 256
const KEYS = 10_000
const ALGORITHMS: AlgorithmName[] = ['gcra', 'fixed-window', 'token-bucket', 'sliding-window', 'leaky-bucket', 'sliding-log']

/** Every request admitted, state living between visits: bench:redis's policies (bench/redis.ts runs on import). */
function policyOf(algorithm: AlgorithmName): PolicyOptions {
  if (algorithm === 'gcra' || algorithm === 'token-bucket') return { algorithm, limit: 1_000, burst: 1e9, period: '3600s' }
  return { algorithm, limit: algorithm === 'sliding-log' ? 1_000 : 1e9, period: '3600s' }
}

/** The runner script as `rev` had it (a part it did not have yet, such as leased-exact.lua, is empty). */
function baseSource(rev: string): string {
  const read = revisionScripts(rev)
  return assembleRunner((name) => read(name) ?? '')
}

/** Redis's CPU seconds so far (user + system). */
async function redisCpu(admin: Redis): Promise<number> {
  const info = await admin.info('cpu')
  const field = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? Number.NaN)
  return field('used_cpu_user') + field('used_cpu_sys')
}

/** How many EVAL calls Redis has run (the store's fallback after NOSCRIPT). */
async function evalCalls(admin: Redis): Promise<number> {
  const info = await admin.info('commandstats')
  return Number(/^cmdstat_eval:calls=(\d+)/m.exec(info)?.[1] ?? 0)
}

async function main(): Promise<void> {
  const server = await startRedis(['--maxmemory', '0'])
  const admin = new Redis({ host: server.host, port: server.port })
  const client = new Redis({ host: server.host, port: server.port, enableAutoPipelining: true })
  try {
    generateThisTree()
    const base = baseSource(BASE)
    const shas = { base: createHash('sha1').update(base).digest('hex'), tree: runnerScript().sha }
    await admin.script('LOAD', base)
    await admin.script('LOAD', runnerScript().source)
    // Every EVALSHA the store sends goes to the script of the block under way.
    let current = shas.tree
    const send = client.sendCommand.bind(client)
    client.sendCommand = ((command: { name: string; args: unknown[] }, ...rest: unknown[]) => {
      if (command.name === 'evalsha') command.args[0] = current
      return (send as (...all: unknown[]) => unknown)(command, ...rest)
    }) as typeof client.sendCommand
    console.log(`runner ${BASE} ${shas.base.slice(0, 8)} vs this tree ${shas.tree.slice(0, 8)}; redis ${server.port}`)
    console.log(`${BLOCKS} blocks of ${DECISIONS} decisions per script and algorithm, ${CALLERS} callers over ${KEYS} keys`)
    console.log(`${POLICIES} ${POLICIES === 1 ? 'policy' : 'policies'} a key`)

    const rows: string[][] = []
    for (const algorithm of ALGORITHMS) {
      const policies = Array.from({ length: POLICIES }, (_, i) => ({ ...policyOf(algorithm), period: `${3600 * 2 ** i}s` as const }))
      const limiter = new RateLimiter({ store: new RedisStore({ client }), policies, timeout: '5s' })
      let next = 0
      const block = async (): Promise<void> => {
        let done = 0
        const caller = async () => {
          while (done < DECISIONS) {
            done++
            const decision = await limiter.limit(`ab-${algorithm}:${(next++ * 7919) % KEYS}`)
            if (decision.source !== 'store') throw new Error(`decision from ${decision.source}`)
          }
        }
        await Promise.all(Array.from({ length: CALLERS }, caller))
      }
      const perDecision = { base: [] as number[], tree: [] as number[] }
      // The redirect is in effect: a script Redis does not know is answered NOSCRIPT (then EVAL).
      const evals = await evalCalls(admin)
      current = 'f'.repeat(40)
      await limiter.limit(`ab-${algorithm}:probe`)
      if ((await evalCalls(admin)) <= evals) throw new Error('EVALSHA is not redirected: the figures would compare nothing')
      current = shas.tree
      await block() // warm-up: keys created, scripts and JIT warm
      for (let i = 0; i < BLOCKS; i++) {
        for (const side of i % 2 === 0 ? (['base', 'tree'] as const) : (['tree', 'base'] as const)) {
          current = shas[side]
          const before = await redisCpu(admin)
          await block()
          perDecision[side].push(((await redisCpu(admin)) - before) / DECISIONS)
        }
      }
      const base = median(perDecision.base) * 1e6
      const tree = median(perDecision.tree) * 1e6
      rows.push([algorithm, base.toFixed(3), tree.toFixed(3), `${(tree / base).toFixed(3)}x`])
      console.log(`  ${algorithm}: ${base.toFixed(3)} µs → ${tree.toFixed(3)} µs`)
    }
    printTable(
      ['algorithm', `redis µs/decision ${BASE}`, 'redis µs/decision this tree', 'this tree / base'],
      rows,
      'Redis CPU per decision (median of blocks; blocks alternate between the two scripts)',
    )
  } finally {
    client.disconnect()
    admin.disconnect()
    await server.stop()
  }
}

await main()
