// Shared helpers for the algorithm proofs: policies, random traces, replaying them, and the checks
// every algorithm must pass (well-formed results, exact retryAfterMs, peeks, ttl, the Lua twin).
//
// Exports (other test files may import them read-only):
//   policyFor(algorithm, limit, periodMs, burst?)   a validated Policy
//   arbTrace(algorithm, options?)                   fast-check traces: a random policy, start time and steps
//   replay(algorithm, trace)                        runs a trace, committing state only when allowed
//   assertWellFormed(result, shaping?)              whole numbers ≥ 0, retryAfterMs 0 when allowed
//   assertRetryAfterExact(algorithm, steps, policy, capacity)   allowed at now + retryAfterMs, denied 1 ms before;
//                                                   a cost above capacity waits resetMs
//   assertPeekKeepsState(algorithm, steps, policy)  a peek's state steps like the state it was given
//   assertTtlForgets(algorithm, steps, policy)      after ttlMs the state steps exactly like no state
//   useRedis()                                      a throwaway redis-server + client for the current suite
//   assertLuaTwin(redis, algorithm, trace)          the Lua twin returns exactly what TypeScript does
//   assertRateBound(steps, policy)                  admitted units in any [a, b] ≤ burst + (b − a) × limit / periodMs
//   itForgetsAfterTtl(algorithm)                    the ttl proof as a test (call inside a describe)
//   itMatchesLuaTwin(redis, algorithm, options?)    the Lua-twin proof as a test, on random traces
//   START                                           a fixed epoch time for example tests

import assert from 'node:assert/strict'
import { after, before, it } from 'node:test'
import fc from 'fast-check'
import { Redis } from 'ioredis'
import { createPolicy, type AlgorithmName, type Policy } from '../../../src/core/policy.js'
import type { Algorithm, State, StepResult } from '../../../src/core/algorithms/types.js'
import { startRedis, type RedisProcess } from '../../support/redis-server.js'
import { luaStep, luaTtl } from '../../support/lua-step.js'

/** 2023-11-14T22:13:20Z: a whole second, so example tests can reason about aligned windows. */
export const START = 1_700_000_000_000

/** A validated policy, as the engine receives it. */
export function policyFor(algorithm: AlgorithmName, limit: number, periodMs: number, burst?: number): Policy {
  return createPolicy({ algorithm, limit, period: periodMs, ...(burst === undefined ? {} : { burst }) })
}

/**
 * One step of a trace: wait `gap` ms (or, with 'retry' / 'reset', exactly the previous result's
 * retryAfterMs / resetMs, to land on the boundaries the algorithm promised), then spend `cost`.
 */
export interface TraceStep {
  gap: number | 'retry' | 'reset'
  cost: number
}

export interface Trace {
  policy: Policy
  start: number
  steps: TraceStep[]
}

export interface TraceOptions {
  maxLimit?: number
  maxSteps?: number
  /** Include refunds (cost < 0); default true. */
  refunds?: boolean
  /** Include peeks (cost 0); default true. */
  peeks?: boolean
  /** Let the clock sometimes step back (negative gaps), as wall clocks do; default false. */
  clockStepsBack?: boolean
}

/** Random traces for one algorithm: small and odd periods as well as real ones, costs mostly 1. */
export function arbTrace(algorithm: AlgorithmName, options: TraceOptions = {}): fc.Arbitrary<Trace> {
  const { maxLimit = 12, maxSteps = 30, refunds = true, peeks = true, clockStepsBack = false } = options
  const bucket = algorithm === 'token-bucket' || algorithm === 'leaky-bucket' || algorithm === 'gcra'
  const policy = fc
    .record({
      // Mostly small limits, where boundaries are hit often; sometimes large ones, to check exactness at scale.
      limit: fc.oneof(
        { weight: 9, arbitrary: fc.integer({ min: 1, max: maxLimit }) },
        { weight: 1, arbitrary: fc.integer({ min: 1, max: 1_000_000 }) },
      ),
      periodMs: fc.oneof(
        fc.integer({ min: 1, max: 50 }),
        fc.integer({ min: 51, max: 5_000 }),
        fc.constantFrom(1_000, 60_000, 3_600_000, 86_400_000, 604_800_000),
      ),
      burstFactor: fc.constantFrom(undefined, 0.5, 1, 2, 3),
    })
    .map(({ limit, periodMs, burstFactor }) => {
      const burst = bucket && burstFactor !== undefined ? Math.max(1, Math.round(limit * burstFactor)) : undefined
      return policyFor(algorithm, limit, periodMs, burst)
    })
  return policy.chain((p) => {
    const capacity = Math.max(p.limit, p.burst)
    const costs: fc.WeightedArbitrary<number>[] = [
      { weight: 8, arbitrary: fc.constant(1) },
      { weight: 3, arbitrary: fc.integer({ min: 2, max: capacity + 1 }) },
    ]
    if (peeks) costs.push({ weight: 2, arbitrary: fc.constant(0) })
    if (refunds) costs.push({ weight: 2, arbitrary: fc.integer({ min: -capacity - 1, max: -1 }) })
    const gaps: fc.WeightedArbitrary<TraceStep['gap']>[] = [
      { weight: 3, arbitrary: fc.constant(0) },
      { weight: 5, arbitrary: fc.integer({ min: 1, max: Math.max(1, Math.ceil(p.periodMs / p.limit)) }) },
      { weight: 4, arbitrary: fc.integer({ min: 0, max: 2 * p.periodMs + 1 }) },
      { weight: 2, arbitrary: fc.constantFrom<'retry' | 'reset'>('retry', 'reset') },
    ]
    if (clockStepsBack) gaps.push({ weight: 2, arbitrary: fc.integer({ min: -p.periodMs - 1, max: -1 }) })
    const gap = fc.oneof(...gaps)
    return fc.record({
      policy: fc.constant(p),
      start: fc.integer({ min: 1_500_000_000_000, max: 1_900_000_000_000 }),
      steps: fc.array(fc.record({ gap, cost: fc.oneof(...costs) }), { minLength: 1, maxLength: maxSteps }),
    })
  })
}

/** One replayed step: the state it started from, when, what it spent, and what it decided. */
export interface Replayed {
  before: State | undefined
  now: number
  cost: number
  result: StepResult
}

/** Runs a trace as a store would for one policy: the new state is kept only when allowed. */
export function replay(algorithm: Algorithm, trace: Trace): Replayed[] {
  const out: Replayed[] = []
  let state: State | undefined
  let now = trace.start
  let last: StepResult | undefined
  for (const { gap, cost } of trace.steps) {
    now += gapMs(gap, last)
    const result = algorithm.step(state, now, cost, trace.policy)
    out.push({ before: state, now, cost, result })
    if (result.allowed) state = result.state
    last = result
  }
  return out
}

function gapMs(gap: TraceStep['gap'], last: StepResult | undefined): number {
  if (gap === 'retry') return last?.retryAfterMs ?? 0
  if (gap === 'reset') return last?.resetMs ?? 0
  return gap
}

/** Every number whole and ≥ 0 (never -0); retryAfterMs 0 when allowed; no delay unless `shaping`. */
export function assertWellFormed(result: StepResult, shaping = false): void {
  for (const field of ['remaining', 'resetMs', 'retryAfterMs', 'delayMs'] as const) {
    const value = result[field]
    assert.ok(Number.isInteger(value) && value >= 0 && !Object.is(value, -0), `${field} = ${value}`)
  }
  if (result.allowed) assert.equal(result.retryAfterMs, 0)
  if (!shaping) assert.equal(result.delayMs, 0)
}

/**
 * For every denial of a cost that can pass at all (≤ capacity): the same cost passes at
 * now + retryAfterMs (> 0), and (the wait being exact) not 1 ms earlier. A cost that can never
 * pass waits resetMs, the time until the policy is fully restored.
 */
export function assertRetryAfterExact(algorithm: Algorithm, steps: readonly Replayed[], policy: Policy, capacity: number): void {
  for (const { before, now, cost, result } of steps) {
    if (result.allowed) continue
    if (cost > capacity) {
      assert.equal(result.retryAfterMs, result.resetMs)
      continue
    }
    assert.ok(result.retryAfterMs > 0, `denied with retryAfterMs ${result.retryAfterMs}`)
    const later = algorithm.step(before, now + result.retryAfterMs, cost, policy)
    assert.ok(later.allowed, `denied again at now + retryAfterMs (${result.retryAfterMs}) for cost ${cost}`)
    const earlier = algorithm.step(before, now + result.retryAfterMs - 1, cost, policy)
    assert.ok(!earlier.allowed, `already allowed 1 ms before now + retryAfterMs (${result.retryAfterMs}) for cost ${cost}`)
  }
}

/** A peek's returned state (what a store commits) behaves exactly like the state it was given. */
export function assertPeekKeepsState(algorithm: Algorithm, steps: readonly Replayed[], policy: Policy): void {
  for (const { before, now } of steps) {
    const peek = algorithm.step(before, now, 0, policy)
    for (const [dt, cost] of [
      [0, 1],
      [1, 2],
      [policy.periodMs, 1],
      [Math.ceil(policy.periodMs / 3), 0],
      [7, -1],
    ]) {
      assert.deepEqual(algorithm.step(peek.state, now + dt, cost, policy), algorithm.step(before, now + dt, cost, policy))
    }
  }
}

/**
 * The ttl promise stores rely on: the committed state, stepped at now + ttlMs (and later), gives
 * exactly what no state gives. ttlMs is a whole number ≥ 1.
 */
export function assertTtlForgets(algorithm: Algorithm, steps: readonly Replayed[], policy: Policy): void {
  for (const { now, result } of steps) {
    if (!result.allowed) continue
    const ttl = algorithm.ttlMs(result.state, now, policy)
    assert.ok(Number.isInteger(ttl) && ttl >= 1, `ttlMs = ${ttl}`)
    for (const extra of [0, 1, policy.periodMs - 1, 3 * policy.periodMs + 17]) {
      for (const cost of [1, 0, -1, policy.limit, Math.max(policy.limit, policy.burst) + 1]) {
        const at = now + ttl + extra
        assert.deepEqual(
          algorithm.step(result.state, at, cost, policy),
          algorithm.step(undefined, at, cost, policy),
          `ttl ${ttl} + ${extra}, cost ${cost}`,
        )
      }
    }
  }
}

/** Starts a redis-server before the suite and stops it after; returns a getter for the client. */
export function useRedis(): () => Redis {
  let server: RedisProcess | undefined
  let client: Redis | undefined
  before(async () => {
    server = await startRedis()
    client = new Redis(server.port, server.host, { lazyConnect: true })
    await client.connect()
  })
  after(async () => {
    await client?.quit()
    await server?.stop()
  })
  return () => {
    if (client === undefined) throw new Error('useRedis: the client exists only inside tests')
    return client
  }
}

/** Replays the trace in TypeScript and checks the Lua twin's step and ttl equal it at every step. */
export async function assertLuaTwin(redis: Redis, algorithm: Algorithm, trace: Trace): Promise<void> {
  for (const { before, now, cost, result } of replay(algorithm, trace)) {
    const lua = await luaStep(redis, algorithm.name, before, now, cost, trace.policy)
    assert.deepEqual(lua, result, `step at ${now} cost ${cost} from ${JSON.stringify(before)}`)
    const ttl = await luaTtl(redis, algorithm.name, result.state, now, trace.policy)
    assert.equal(ttl, algorithm.ttlMs(result.state, now, trace.policy), `ttl of ${JSON.stringify(result.state)} at ${now}`)
  }
}

/** The ttl proof every algorithm shares, as a test: after ttlMs a state steps exactly like no state. */
export function itForgetsAfterTtl(algorithm: Algorithm, options: TraceOptions = {}, numRuns = 200): void {
  it('after ttlMs a state steps exactly like no state', () => {
    fc.assert(
      fc.property(arbTrace(algorithm.name, options), (trace) => assertTtlForgets(algorithm, replay(algorithm, trace), trace.policy)),
      { numRuns },
    )
  })
}

/** The Lua-twin proof every algorithm shares, as a test: identical steps and ttl on random traces. */
export function itMatchesLuaTwin(redis: () => Redis, algorithm: Algorithm, options: TraceOptions = {}, numRuns = 150): void {
  it('returns exactly what the TypeScript step and ttl return, also when the clock steps back', async () => {
    await fc.assert(
      fc.asyncProperty(arbTrace(algorithm.name, { clockStepsBack: true, ...options }), (trace) => assertLuaTwin(redis(), algorithm, trace)),
      { numRuns },
    )
  })
}

/** Admitted units in every interval [a, b] of a time-ordered trace stay within burst + (b − a) × limit / periodMs. */
export function assertRateBound(steps: readonly Replayed[], policy: Policy): void {
  const { limit, periodMs, burst } = policy
  const admitted = steps.filter((s) => s.result.allowed && s.cost > 0)
  for (let i = 0; i < admitted.length; i++) {
    let units = 0
    for (let j = i; j < admitted.length; j++) {
      units += admitted[j].cost
      // Multiplied out by periodMs to stay exact.
      assert.ok(
        units * periodMs <= burst * periodMs + (admitted[j].now - admitted[i].now) * limit,
        `${units} admitted in [${admitted[i].now}, ${admitted[j].now}]`,
      )
    }
  }
}
