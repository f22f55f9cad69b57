// Runs one algorithm's Lua twin (src/stores/redis/scripts/<name>.lua, after the prelude) for a single step
// on a real Redis, so property tests can compare it with the TypeScript step number for number.

import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import type { Redis } from 'ioredis'
import { ALGORITHMS, type AlgorithmName, type Policy } from '../../src/core/policy.js'
import type { State, StepResult } from '../../src/core/algorithms/types.js'

const SCRIPTS = fileURLToPath(new URL('../../src/stores/redis/scripts/', import.meta.url))

// Numbers cross the Lua boundary as %.17g strings so doubles round-trip exactly.
const HARNESS = `
local name = ARGV[1]
local now = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local p = { limit = tonumber(ARGV[4]), periodMs = tonumber(ARGV[5]), burst = tonumber(ARGV[6]), shaping = ARGV[7] == '1' }
local op = ARGV[8]
local state = nil
if ARGV[9] ~= 'nil' then
  state = {}
  for i = 10, #ARGV do state[#state + 1] = tonumber(ARGV[i]) end
end
local function fmt(x) return string.format('%.17g', x) end
if op == 'ttl' then
  return { fmt(ALGORITHMS[name].ttl(state, now, p)) }
end
local r = ALGORITHMS[name].step(state, now, cost, p)
local out = { r.allowed and '1' or '0', fmt(r.remaining), fmt(r.resetMs), fmt(r.retryAfterMs), fmt(r.delayMs) }
for i = 1, #r.state do out[#out + 1] = fmt(r.state[i]) end
return out
`

const sources = new Map<string, string>()

function script(name: AlgorithmName): string {
  let source = sources.get(name)
  if (source === undefined) {
    // Every algorithm file, as in the real script: one may build on another (shaping on gcra).
    source = [
      readFileSync(`${SCRIPTS}prelude.lua`, 'utf8'),
      ...ALGORITHMS.map((algorithm) => readFileSync(`${SCRIPTS}${algorithm}.lua`, 'utf8')),
      HARNESS,
    ].join('\n')
    sources.set(name, source)
  }
  return source
}

function args(name: AlgorithmName, state: State | undefined, now: number, cost: number, policy: Policy, op: string): string[] {
  return [
    name,
    String(now),
    String(cost),
    String(policy.limit),
    String(policy.periodMs),
    String(policy.burst),
    policy.shaping ? '1' : '0',
    op,
    state === undefined ? 'nil' : 'state',
    ...(state ?? []).map((x) => x.toPrecision(17)),
  ]
}

/** The Lua twin's `step`, on a real Redis. */
export async function luaStep(
  redis: Redis,
  name: AlgorithmName,
  state: State | undefined,
  now: number,
  cost: number,
  policy: Policy,
): Promise<StepResult> {
  const out = (await redis.eval(script(name), 0, ...args(name, state, now, cost, policy, 'step'))) as string[]
  const [allowed, remaining, resetMs, retryAfterMs, delayMs, ...rest] = out
  return {
    allowed: allowed === '1',
    remaining: Number(remaining),
    resetMs: Number(resetMs),
    retryAfterMs: Number(retryAfterMs),
    delayMs: Number(delayMs),
    state: rest.map(Number),
  }
}

/** The Lua twin's `ttl`, on a real Redis. */
export async function luaTtl(redis: Redis, name: AlgorithmName, state: State, now: number, policy: Policy): Promise<number> {
  const [ttl] = (await redis.eval(script(name), 0, ...args(name, state, now, 0, policy, 'ttl'))) as string[]
  return Number(ttl)
}
