// Runs merge.lua's MERGES[name] (after the prelude and every algorithm file, as the store's script
// has them) for one merge on a real Redis, so property tests can compare it with core/merge.ts.

import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import type { Redis } from 'ioredis'
import { ALGORITHMS, type Policy } from '../../src/core/policy.js'
import type { State } from '../../src/core/algorithms/types.js'

const SCRIPTS = fileURLToPath(new URL('../../src/stores/redis/scripts/', import.meta.url))

// Numbers cross the Lua boundary as %.17g strings so doubles round-trip exactly.
const HARNESS = `
local p = { limit = tonumber(ARGV[3]), periodMs = tonumber(ARGV[4]), burst = tonumber(ARGV[5]), shaping = ARGV[6] == '1' }
local state = nil
if ARGV[8] ~= 'nil' then
  state = {}
  for i = 9, #ARGV do state[#state + 1] = tonumber(ARGV[i]) end
end
local merged = MERGES[ARGV[1]](state, tonumber(ARGV[2]), tonumber(ARGV[7]), p)
local out = {}
for i = 1, #merged do out[i] = string.format('%.17g', merged[i]) end
return out
`

let source: string | undefined

function script(): string {
  source ??= [
    readFileSync(`${SCRIPTS}prelude.lua`, 'utf8'),
    ...ALGORITHMS.map((algorithm) => readFileSync(`${SCRIPTS}${algorithm}.lua`, 'utf8')),
    readFileSync(`${SCRIPTS}merge.lua`, 'utf8'),
    HARNESS,
  ].join('\n')
  return source
}

/** merge.lua's merge of `units` into `state` at `now`, on a real Redis. */
export async function luaMerge(redis: Redis, state: State | undefined, now: number, units: number, policy: Policy): Promise<State> {
  const args = [
    policy.algorithm,
    String(now),
    String(policy.limit),
    String(policy.periodMs),
    String(policy.burst),
    policy.shaping ? '1' : '0',
    String(units),
    state === undefined ? 'nil' : 'state',
    ...(state ?? []).map((x) => x.toPrecision(17)),
  ]
  const out = (await redis.eval(script(), 0, ...args)) as string[]
  return out.map(Number)
}
