// `node --conditions=floodgate-source --import tsx bench/redis-lua-steps.ts [base-rev]`: Redis CPU
// per algorithm step, the Lua twins of this tree against those of `base-rev` (default main). Run
// it under `flock /tmp/floodgate-bench.lock`.
//
// Why beside bench:redis-lua: a decision costs Redis ~3 µs, of which the step is a tenth; a step a
// few percent dearer hides in that. Here one EVALSHA runs 200 000 steps of one algorithm (prelude,
// the twins and a loop, nothing else), the two sides alternate, and Redis's used_cpu is read around
// each call. Every step is admitted (state lives on, as in bench:redis).

import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { Redis } from 'ioredis'
import { ALGORITHMS } from '../packages/floodgate/src/core/policy.js'
import { startRedis } from '../packages/floodgate/test/support/redis-server.js'
import { generateThisTree, revisionScripts } from './revision-scripts.js'
import { median, printTable } from './support.js'

const BASE = process.argv[2] ?? 'main'
const STEPS = 200_000
const CALLS = 15
const SCRIPTS = 'packages/floodgate/src/stores/redis/scripts'
const ROOT = fileURLToPath(new URL('..', import.meta.url))

// The loop: one key, its state carried from step to step through two result buffers (a step's
// `out` must not hold the state it reads). Policies as bench:redis's: every step admitted.
const DRIVER = `
local policies = {
  ['fixed-window'] = { limit = 1e9, periodMs = 3600000, burst = 1e9 },
  ['sliding-window'] = { limit = 1e9, periodMs = 3600000, burst = 1e9 },
  ['token-bucket'] = { limit = 1000, periodMs = 3600000, burst = 1e9 },
  ['leaky-bucket'] = { limit = 1e9, periodMs = 3600000, burst = 1e9 },
  ['gcra'] = { limit = 1000, periodMs = 3600000, burst = 1e9 },
}
local name, n = ARGV[1], tonumber(ARGV[2])
local p, step = policies[name], ALGORITHMS[name].step
local buffers, state, k, admitted = { createStepResult(), createStepResult() }, nil, 1, 0
for i = 1, n do
  local result = step(state, 1700000000000 + i, 1, p, buffers[k])
  if result.allowed then admitted = admitted + 1 end
  state, k = result.state, 3 - k
end
return admitted`
const MEASURED = ['fixed-window', 'sliding-window', 'token-bucket', 'leaky-bucket', 'gcra']

function source(read: (name: string) => string): string {
  return [read('prelude'), ...ALGORITHMS.map(read), DRIVER].join('\n')
}

async function redisCpu(admin: Redis): Promise<number> {
  const info = await admin.info('cpu')
  const field = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? Number.NaN)
  return field('used_cpu_user') + field('used_cpu_sys')
}

async function main(): Promise<void> {
  const server = await startRedis(['--maxmemory', '0'])
  const redis = new Redis({ host: server.host, port: server.port })
  try {
    generateThisTree()
    const read = revisionScripts(BASE)
    const base = source((name) => {
      const text = read(name)
      if (text === undefined) throw new Error(`${BASE} has no ${SCRIPTS}/${name}.lua`)
      return text
    })
    const tree = source((name) => readFileSync(`${ROOT}${SCRIPTS}/${name}.lua`, 'utf8'))
    const shas = { base: String(await redis.script('LOAD', base)), tree: String(await redis.script('LOAD', tree)) }
    const rows: string[][] = []
    for (const algorithm of MEASURED) {
      const nsPerStep = { base: [] as number[], tree: [] as number[] }
      for (const side of ['base', 'tree'] as const) await redis.evalsha(shas[side], 0, algorithm, 1_000)
      for (let i = 0; i < CALLS; i++) {
        for (const side of i % 2 === 0 ? (['base', 'tree'] as const) : (['tree', 'base'] as const)) {
          const before = await redisCpu(redis)
          const admitted = await redis.evalsha(shas[side], 0, algorithm, STEPS)
          if (admitted !== STEPS) throw new Error(`${algorithm} (${side}): ${admitted} of ${STEPS} steps admitted`)
          nsPerStep[side].push((((await redisCpu(redis)) - before) / STEPS) * 1e9)
        }
      }
      const [b, t] = [median(nsPerStep.base), median(nsPerStep.tree)]
      rows.push([algorithm, b.toFixed(1), t.toFixed(1), `${(t / b).toFixed(3)}x`])
    }
    printTable(
      ['algorithm', `ns/step ${BASE}`, 'ns/step this tree', 'this tree / base'],
      rows,
      `Redis CPU per step (median of ${CALLS} calls of ${STEPS} steps per side; the sides alternate)`,
    )
  } finally {
    redis.disconnect()
    await server.stop()
  }
}

await main()
