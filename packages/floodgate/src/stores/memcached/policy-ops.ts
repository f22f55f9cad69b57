// One policy of one key on memcached: fixed and sliding windows as atomic counters, every other algorithm as gets/cas on its record.

import { evaluateKey, type PolicyRecord, type PolicyResult } from '../../core/evaluate.js'
import { FloodgateError } from '../../core/errors.js'
import type { Policy } from '../../core/policy.js'
import type { MemcachedOps } from './protocol.js'
import { decodeRecord, encodeRecord } from './record-codec.js'

/** What charging one policy did: its result, and how to take the charge back (when it took one). */
export interface PolicyCharge {
  result: PolicyResult
  undo?: () => Promise<void>
}

/** Compare-and-swap contention so far, for tests, benchmarks and metrics. */
export interface CasStats {
  /** Writes that lost a race and were tried again (each a further gets + cas). */
  retries: number
  /** Decisions refused because every try lost its race (`casRetries` exhausted). */
  exhausted: number
}

/**
 * Whether a policy is kept as plain counters: fixed and sliding windows with no block period (a
 * block needs a record beside the count, which only the gets/cas path keeps). Costs are whole
 * numbers (the store refuses others), as `incr` counts.
 */
export function countsAtomically(policy: Policy): boolean {
  return (policy.algorithm === 'fixed-window' || policy.algorithm === 'sliding-window') && policy.blockMs === 0
}

/**
 * Runs one policy's step on memcached. The decision itself is always `evaluateKey` of
 * src/core/evaluate.ts on a one-policy record, so this file holds no algorithm:
 * - counters (see `countsAtomically`): `incr` the window's counter by the cost first (atomic, created
 *   at the cost when absent), then step the core algorithm from the count before this increment;
 *   a denial `decr`s it back at once. No request is ever admitted over the limit (each admitted
 *   increment saw a count ≤ the limit), and a concurrent one may briefly see a denied one's units.
 * - records: `gets`, step, `cas` (or `add` when absent), repeated up to `casRetries` times while
 *   another writer got there first.
 */
export class PolicyOps {
  /**
   * `stats`: where contention is counted; a store whose server list changes shares one between the
   * PolicyOps of each list, so its counters run on across a swap.
   */
  constructor(
    readonly ops: MemcachedOps,
    private readonly casRetries: number,
    readonly stats: CasStats = { retries: 0, exhausted: 0 },
  ) {}

  /** Charges (`cost > 0`), peeks (0) or refunds (< 0) one policy under its base key `key` at `now`. */
  apply(key: string, policy: Policy, cost: number, now: number, deadline: number | undefined): Promise<PolicyCharge> {
    if (!countsAtomically(policy)) return this.casStep(key, policy, cost, now, deadline, false)
    return policy.algorithm === 'fixed-window' ? this.fixedWindow(key, policy, cost, now) : this.slidingWindow(key, policy, cost, now)
  }

  /**
   * What a charge of `cost` would answer, charging nothing, for a policy after the one that denied
   * a request (as `evaluateKey` answers for them): denied with its wait if it would deny (and its block
   * period starts), else a peek's answer.
   */
  async judge(key: string, policy: Policy, cost: number, now: number): Promise<PolicyCharge> {
    if (!countsAtomically(policy)) return this.casStep(key, policy, cost, now, undefined, true)
    const keys = this.counterKeys(key, policy, now)
    const counts = await Promise.all(keys.map((counter) => this.count(counter)))
    const state = [Math.floor(now / policy.periodMs) * policy.periodMs, ...counts]
    const result = stepCounted(policy, state, now, cost)
    return { result: result.allowed ? stepCounted(policy, state, now, 0) : result }
  }

  /** The counter keys of a counted policy at `now` (current window, and the previous one for a sliding window). */
  counterKeys(key: string, policy: Policy, now: number): string[] {
    const windowStart = Math.floor(now / policy.periodMs) * policy.periodMs
    const keys = [`${key}:${windowStart}`]
    if (policy.algorithm === 'sliding-window') keys.push(`${key}:${windowStart - policy.periodMs}`)
    return keys
  }

  private async fixedWindow(key: string, policy: Policy, cost: number, now: number): Promise<PolicyCharge> {
    const windowStart = Math.floor(now / policy.periodMs) * policy.periodMs
    const counter = `${key}:${windowStart}`
    if (cost <= 0) {
      const count = cost === 0 ? await this.count(counter) : ((await this.ops.decrement(counter, -cost)) ?? 0)
      return { result: stepCounted(policy, [windowStart, count], now, 0) }
    }
    const after = await this.ops.increment(counter, cost, secondsUntil(windowStart + policy.periodMs, now), now)
    const result = stepCounted(policy, [windowStart, after - cost], now, cost)
    if (!result.allowed) {
      await this.ops.decrement(counter, cost)
      return { result }
    }
    return { result, undo: () => this.ops.decrement(counter, cost).then(nothing) }
  }

  private async slidingWindow(key: string, policy: Policy, cost: number, now: number): Promise<PolicyCharge> {
    const windowStart = Math.floor(now / policy.periodMs) * policy.periodMs
    const current = `${key}:${windowStart}`
    const previous = `${key}:${windowStart - policy.periodMs}`
    if (cost <= 0) {
      let [count, previousCount] = await Promise.all([this.count(current), this.count(previous)])
      if (cost < 0) {
        // As the core's refund: off the newest count first, the rest off the previous window.
        const fromCurrent = Math.min(count, -cost)
        const fromPrevious = Math.min(previousCount, -cost - fromCurrent)
        if (fromCurrent > 0) count = (await this.ops.decrement(current, fromCurrent)) ?? 0
        if (fromPrevious > 0) previousCount = (await this.ops.decrement(previous, fromPrevious)) ?? 0
      }
      return { result: stepCounted(policy, [windowStart, count, previousCount], now, 0) }
    }
    const [after, previousCount] = await Promise.all([
      this.ops.increment(current, cost, secondsUntil(windowStart + 2 * policy.periodMs, now), now),
      this.count(previous),
    ])
    const result = stepCounted(policy, [windowStart, after - cost, previousCount], now, cost)
    if (!result.allowed) {
      await this.ops.decrement(current, cost)
      return { result }
    }
    return { result, undo: () => this.ops.decrement(current, cost).then(nothing) }
  }

  // `judgeOnly`: keep nothing but a block period the step starts (see `judge`).
  private async casStep(
    key: string,
    policy: Policy,
    cost: number,
    now: number,
    deadline: number | undefined,
    judgeOnly: boolean,
  ): Promise<PolicyCharge> {
    for (let attempt = 0; attempt <= this.casRetries; attempt++) {
      if (attempt > 0) {
        this.stats.retries++
        // Lost a race: wait a random while (up to 2^attempt ms, at most 32) so colliding writers spread
        // out instead of colliding again at once.
        await sleep(Math.random() * Math.min(32, 2 ** attempt))
        if (deadline !== undefined && performance.now() > deadline) throw timedOut()
      }
      const { value, cas } = await this.ops.gets(key)
      const record = value === null ? undefined : decodeRecord(value)
      const evaluation = evaluateKey([record], now, cost, [policy])
      const result = evaluation.results[0]
      const next = evaluation.records[0]
      if (judgeOnly && evaluation.allowed) return { result: evaluateKey([record], now, 0, [policy]).results[0] }
      if (!changes(record, next, cost, evaluation.allowed)) return { result }
      const bytes = encodeRecord(next)
      // One second more than the state matters: memcached's clock ticks in whole seconds.
      const seconds = evaluation.ttlMs[0] / 1000 + 1
      const written = cas === null ? await this.ops.add(key, bytes, seconds, now) : await this.ops.cas(key, bytes, seconds, cas, now)
      if (written.outcome !== 'stored') continue
      if (!(cost > 0 && result.allowed)) return { result }
      return { result, undo: () => this.restore(key, policy, cost, now, record, value, written.cas) }
    }
    this.stats.exhausted++
    throw new FloodgateError(
      'STORE_UNAVAILABLE',
      `memcached: gave up on ${JSON.stringify(key)} after ${this.casRetries + 1} compare-and-swap conflicts; ` +
        'a key this hot is better kept in Redis (RedisStore decides it in one script call), or raise casRetries',
    )
  }

  /**
   * Takes back a charge written by `casStep`: puts back the bytes it replaced (or deletes what it added)
   * while nobody has written since, so the record is exactly as if the charge never happened; else
   * refunds the cost with a step of its own (an algorithm's refund may leave a state that differs in
   * its wait, e.g. a concurrency lease's expiry, from one never charged).
   */
  private async restore(
    key: string,
    policy: Policy,
    cost: number,
    now: number,
    record: PolicyRecord | undefined,
    before: Buffer | null,
    ours: Buffer | null,
  ): Promise<void> {
    if (ours !== null) {
      const seconds = record === undefined ? 0 : evaluateKey([record], now, 0, [policy]).ttlMs[0] / 1000 + 1
      const undone = before === null ? await this.ops.deleteIf(key, ours) : await this.ops.cas(key, before, seconds, ours, now)
      if (undone.outcome === 'stored') return
    }
    await this.casStep(key, policy, -cost, now, undefined, false)
  }

  /** A counter's value (0 when absent). */
  private async count(key: string): Promise<number> {
    const { value } = await this.ops.gets(key)
    if (value === null) return 0
    const count = Number(value.toString('latin1').trim())
    return Number.isFinite(count) ? count : 0
  }
}

/** Whether a step's outcome must be written: a peek never is, nor a denial that starts no block, nor a refund of nothing. */
function changes(record: PolicyRecord | undefined, next: PolicyRecord, cost: number, allowed: boolean): boolean {
  if (cost === 0) return false
  if (cost < 0) return record !== undefined
  return allowed || next.blockedUntil > (record?.blockedUntil ?? 0)
}

/** The core's decision for one counted policy, from the count before this request's charge. */
function stepCounted(policy: Policy, state: number[], now: number, cost: number): PolicyResult {
  return evaluateKey([{ blockedUntil: 0, state }], now, cost, [policy]).results[0]
}

/**
 * Seconds from `now` to `at` (ms), plus one: memcached's clock ticks in whole seconds, and a counter
 * must not go before its window does.
 */
function secondsUntil(at: number, now: number): number {
  return Math.ceil((at - now) / 1000) + 1
}

export function timedOut(): FloodgateError {
  return new FloodgateError('STORE_TIMEOUT', 'memcached: the decision passed its deadline; nothing of it is kept')
}

function nothing(): void {}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}
