// The one path every call of the limiter to its store takes: bounded by a timeout and a circuit
// breaker per shard, with failures turned into `undefined` answers (the failure mode then decides) and events.

import type { EventEmitter } from 'node:events'
import type { Policy } from '../core/policy.js'
import type { EvaluateRequest, EvaluateResponse, Store, SubmitCallback } from '../stores/store.js'
import type { CircuitBreaker } from './circuit-breaker.js'
import type { PolicyPlan, Tier } from './policy-plan.js'
import { ShardBreakers, WHOLE_STORE } from './shard-breakers.js'
import { REAL_TIMERS, Timeouts, type TimeoutEntry, type Timers } from './timeout.js'
import type { DecisionSource, RateLimiterEvents, StoreCallHook } from './types.js'

/**
 * A store's answer to one request: the response, or undefined when the store failed, timed out or
 * was skipped. A promise unless the store answers in-process. An in-process answer may be the
 * store's scratch object (see `Store.evaluateSync`): read it before the next call.
 */
export type StoreAnswer = EvaluateResponse | undefined | Promise<EvaluateResponse | undefined>

/** Where a decision's state lives: the configured store (GuardedStore) or the local fallback store. */
export interface Backend {
  /** The source of the decisions made on it. */
  readonly source: DecisionSource
  /** Which of the plan's tiers it runs (the local one has each limit divided by `instances`). */
  tier(plan: PolicyPlan): Tier
  /** Decides one request (cost > 0 charges, 0 peeks, < 0 refunds). */
  call(key: string, policies: readonly Policy[], cost: number): StoreAnswer
}

/**
 * Starts one request on whatever answers it (the store's submit, or another engine over the store)
 * and calls `done` once. May return a function that abandons the request: the timeout calls it.
 */
export type Starter = (request: EvaluateRequest, done: SubmitCallback) => (() => void) | void

/** How a GuardedStore bounds its calls (from the limiter's resolved options). */
export interface GuardOptions {
  timeoutMs: number
  /** The shortest adaptive deadline (default `timeoutMs`: fixed); see Timeouts. */
  timeoutMinMs?: number
  breakerFailures: number
  breakerCooldownMs: number
  /** Milliseconds since the epoch: when the breaker opened and when it may probe. */
  clock: () => number
  /** The monotonic clock and timer of the timeout. */
  timers: Timers
  /** Told of each store call as it starts; its returned function, as it ends (tracing). */
  onStoreCall?: StoreCallHook
}

/**
 * The configured store behind its guards. A store that answers in-process (`evaluateSync`) is
 * called synchronously, with no promise and no timeout (a synchronous call cannot be interrupted);
 * any other through `submit` (or `evaluate` when it has none), with one promise per call, answered
 * by the first of the store and the timeout. The breaker counts failures of both kinds.
 *
 * A store with `shardOf` (memcached servers, Redis Cluster masters) has a breaker per shard: a
 * failing shard's keys skip the store while every other shard's keys are decided by it as usual.
 * The limiter's 'breaker-open'/'breaker-close' events name the shard (`''`: the whole store).
 */
export class GuardedStore implements Backend {
  readonly source: DecisionSource = 'store'
  /** The store offers `evaluateSync`: every answer is synchronous. */
  readonly synchronous: boolean
  /** The breakers, by shard; a store without shards has only `breakers.whole`. */
  readonly breakers: ShardBreakers
  // The store has shardOf: read once, as the memory store's path is the hot one.
  private readonly sharded: boolean
  private readonly timeouts: Timeouts
  private readonly clock: () => number
  // With injected timers, the store still gets its deadline in performance.now() terms.
  private readonly realTimers: boolean
  private readonly timeoutMs: number
  private readonly onStoreCall: StoreCallHook | undefined

  constructor(
    readonly store: Store,
    options: GuardOptions,
    private readonly events: EventEmitter<RateLimiterEvents>,
  ) {
    this.synchronous = typeof store.evaluateSync === 'function'
    this.breakers = new ShardBreakers(options.breakerFailures, options.breakerCooldownMs)
    this.sharded = typeof store.shardOf === 'function'
    this.timeouts = new Timeouts(options.timeoutMs, options.timers, options.timeoutMinMs)
    this.clock = options.clock
    this.realTimers = options.timers === REAL_TIMERS
    this.timeoutMs = options.timeoutMs
    this.onStoreCall = options.onStoreCall
  }

  /** Synchronous, without shards and without an onStoreCall hook: a call is the store's evaluateSync alone. */
  get plain(): boolean {
    return this.synchronous && !this.sharded && this.onStoreCall === undefined
  }

  tier(plan: PolicyPlan): Tier {
    return plan.remote
  }

  /** The name of `key`'s shard (the whole store's, for a store without shards). */
  shardOf(key: string): string {
    return this.sharded ? this.store.shardOf!(key) : WHOLE_STORE
  }

  call(key: string, policies: readonly Policy[], cost: number): StoreAnswer {
    // A store without shards (the embedded one) goes straight to its one breaker.
    const shard = this.sharded ? this.store.shardOf!(key) : WHOLE_STORE
    const breaker = this.sharded ? this.breakers.of(shard) : this.breakers.whole
    // An open breaker skips the store until it lets a probe through (closed, it allows everything).
    if (breaker.isOpen && !breaker.allows(this.clock())) return this.synchronous ? undefined : RESOLVED_UNDEFINED
    if (this.onStoreCall !== undefined) return this.observed(key, cost, () => this.callStore(key, policies, cost, shard, breaker))
    return this.callStore(key, policies, cost, shard, breaker)
  }

  private callStore(key: string, policies: readonly Policy[], cost: number, shard: string, breaker: CircuitBreaker): StoreAnswer {
    if (!this.synchronous) return this.callLater(key, policies, cost, this.submit, shard, breaker)
    let response: EvaluateResponse
    try {
      // A new request, not one kept and rewritten: the compiler removes it when it inlines the
      // store's evaluateSync, and a kept one pays a write barrier for every new key string.
      response = this.store.evaluateSync!({ key, policies, cost })
    } catch (error) {
      return this.failed(error, shard, breaker)
    }
    this.answered(shard, breaker)
    return response
  }

  /** A failure of a call made past `call` (DirectPath) on a store without shards: reported and counted as `call` does. */
  failedWhole(error: unknown): undefined {
    return this.failed(error, WHOLE_STORE, this.breakers.whole)
  }

  /** Resets `key` on the store, bounded like a decision; failures are reported, never thrown. */
  reset(key: string, policies: readonly Policy[]): Promise<void> {
    const shard = this.shardOf(key)
    const breaker = this.breakers.of(shard)
    if (breaker.isOpen && !breaker.allows(this.clock())) return RESOLVED_UNDEFINED
    let pending: Promise<void>
    try {
      pending = this.store.reset(key, policies)
    } catch (error) {
      return Promise.resolve(this.failed(error, shard, breaker))
    }
    return this.timeouts.run(pending).then(
      () => this.answered(shard, breaker),
      (error: unknown) => this.failed(error, shard, breaker),
    )
  }

  /**
   * What fail-closed tells the caller to wait: until the next probe of `key`'s shard, or one
   * cooldown. Without a key: until the soonest probe of any open breaker.
   */
  closedWaitMs(key?: string): number {
    const now = this.clock()
    if (key !== undefined) {
      const breaker = this.breakers.of(this.shardOf(key))
      return breaker.isOpen ? breaker.waitMs(now) : breaker.cooldownMs
    }
    let wait = this.breakers.cooldownMs
    for (const shard of this.breakers.openShards()) wait = Math.min(wait, this.breakers.of(shard).waitMs(now))
    return wait
  }

  /**
   * The store says `shard` may answer again (`''`: all of it): its open breaker probes with the
   * next call instead of waiting out the cooldown, and the breakers of shards that no longer hold
   * keys (a failed-over Cluster master) are forgotten, announced as closed.
   */
  recovered(shard: string): void {
    // A store seen as one shard (a wrapper that does not forward shardOf) probes on any recovery.
    this.breakers.probeNow(this.sharded ? shard : WHOLE_STORE)
    if (!this.sharded || this.store.shards === undefined) return
    for (const retired of this.breakers.retire(this.store.shards())) this.events.emit('breaker-close', retired)
  }

  /**
   * `call`, answered by `start` instead of the store's own submit (a sync mode's engine over the
   * store), with the same timeout, breaker and events; the timeout abandons it through the function
   * `start` returned.
   */
  callVia(key: string, policies: readonly Policy[], cost: number, start: Starter): Promise<EvaluateResponse | undefined> {
    const shard = this.shardOf(key)
    const breaker = this.breakers.of(shard)
    if (breaker.isOpen && !breaker.allows(this.clock())) return RESOLVED_UNDEFINED
    if (this.onStoreCall !== undefined)
      return this.observed(key, cost, () => this.callLater(key, policies, cost, start, shard, breaker)) as Promise<
        EvaluateResponse | undefined
      >
    return this.callLater(key, policies, cost, start, shard, breaker)
  }

  // A call with the onStoreCall hook told of its start and end; an undefined answer is a failure
  // (error, timeout), since an open breaker returns before any call is made.
  private observed(key: string, cost: number, call: () => StoreAnswer): StoreAnswer {
    const end = (this.onStoreCall as StoreCallHook)(key, cost)
    if (end === undefined) return call()
    let answer: StoreAnswer
    try {
      answer = call()
    } catch (error) {
      end(true)
      throw error
    }
    if (!(answer instanceof Promise)) {
      end(answer === undefined)
      return answer
    }
    return answer.then(
      (response) => {
        end(response === undefined)
        return response
      },
      (error: unknown) => {
        end(true)
        throw error
      },
    )
  }

  // One promise per call, answered from the store's callback or by the timeout. Closures live only
  // in functions of the asynchronous path: a function that makes one allocates its context on every
  // call, also on the paths that never make it.
  private callLater(
    key: string,
    policies: readonly Policy[],
    cost: number,
    start: Starter,
    shard: string,
    breaker: CircuitBreaker,
  ): Promise<EvaluateResponse | undefined> {
    return new Promise<EvaluateResponse | undefined>((resolve, reject) => {
      let abandon: (() => void) | void
      // The first of the store's answer and the timeout decides; the other finds the entry settled.
      const entry = this.timeouts.start((timeout) => {
        abandon?.()
        this.answer(resolve, reject, timeout, undefined, shard, breaker)
      })
      // The deadline lets the store skip the charge once the timeout has answered the caller.
      const request: EvaluateRequest = { key, policies, cost, deadline: this.deadlineOf(entry) }
      try {
        abandon = start(request, (error, response) => {
          if (this.timeouts.settle(entry)) this.answer(resolve, reject, error, response, shard, breaker)
          // A late answer: the store (this shard) is slow, not dead; its breaker must not stay open for it.
          else if (error == null && response !== undefined) this.answered(shard, breaker)
        })
      } catch (error) {
        if (this.timeouts.settle(entry)) this.answer(resolve, reject, error, undefined, shard, breaker)
      }
    })
  }

  // The store's own way to answer one request: submit, or evaluate when it has none.
  private readonly submit: Starter = (request, done) => {
    if (this.store.submit !== undefined) return this.store.submit(request, done)
    this.store.evaluate([request]).then(
      (responses) => done(null, responses[0]),
      (error: unknown) => done(error),
    )
  }

  // Settles a call's promise. A listener of the limiter's events may throw: that rejects the call
  // rather than escaping into the store's callback.
  private answer(
    resolve: (response: EvaluateResponse | undefined) => void,
    reject: (error: unknown) => void,
    error: unknown,
    response: EvaluateResponse | undefined,
    shard: string,
    breaker: CircuitBreaker,
  ): void {
    try {
      if (error == null && response !== undefined) {
        this.answered(shard, breaker)
        resolve(response)
      } else {
        resolve(this.failed(error ?? new Error(NO_ANSWER), shard, breaker))
      }
    } catch (thrown) {
      reject(thrown)
    }
  }

  private deadlineOf(entry: TimeoutEntry): number {
    return this.realTimers ? entry.deadline : performance.now() + this.timeoutMs
  }

  private answered(shard: string, breaker: CircuitBreaker): undefined {
    // Closed and no streak to end (the usual case): nothing to record.
    if (breaker.isOpen || breaker.streak > 0) {
      if (breaker.recordSuccess() === 'closed') this.events.emit('breaker-close', this.breakers.nameOf(shard, breaker))
    }
    return undefined
  }

  private failed(error: unknown, shard: string, breaker: CircuitBreaker): undefined {
    this.events.emit('store-error', asError(error))
    const transition = breaker.recordFailure(this.clock())
    const name = this.breakers.nameOf(shard, breaker)
    if (breaker.isOpen) this.store.recover?.(name)
    if (transition === 'opened') this.events.emit('breaker-open', name)
    return undefined
  }
}

const RESOLVED_UNDEFINED = Promise.resolve(undefined)

const NO_ANSWER =
  'the store called done() with neither a response nor an error; a Store.submit must call done(null, response) or done(error)'

/** Anything thrown, as an Error for the 'store-error' event. */
export function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error))
}
