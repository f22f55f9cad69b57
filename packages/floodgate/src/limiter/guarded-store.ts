// The one path every call of the limiter to its store takes: bounded by a timeout and a circuit
// breaker, with failures turned into `undefined` answers (the failure mode then decides) and events.

import type { EventEmitter } from 'node:events'
import type { Policy } from '../core/policy.js'
import type { EvaluateRequest, EvaluateResponse, Store, SubmitCallback } from '../stores/store.js'
import { CircuitBreaker } from './circuit-breaker.js'
import type { PolicyPlan, Tier } from './policy-plan.js'
import { REAL_TIMERS, Timeouts, type TimeoutEntry, type Timers } from './timeout.js'
import type { DecisionSource, RateLimiterEvents } from './types.js'

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
  breakerFailures: number
  breakerCooldownMs: number
  /** Milliseconds since the epoch: when the breaker opened and when it may probe. */
  clock: () => number
  /** The monotonic clock and timer of the timeout. */
  timers: Timers
}

/**
 * The configured store behind its guards. A store that answers in-process (`evaluateSync`) is
 * called synchronously, with no promise and no timeout (a synchronous call cannot be interrupted);
 * any other through `submit` (or `evaluate` when it has none), with one promise per call, answered
 * by the first of the store and the timeout. The breaker counts failures of both kinds.
 */
export class GuardedStore implements Backend {
  readonly source: DecisionSource = 'store'
  /** The store offers `evaluateSync`: every answer is synchronous. */
  readonly synchronous: boolean
  readonly breaker: CircuitBreaker
  private readonly timeouts: Timeouts
  private readonly clock: () => number
  // With injected timers, the store still gets its deadline in performance.now() terms.
  private readonly realTimers: boolean
  private readonly timeoutMs: number

  constructor(
    readonly store: Store,
    options: GuardOptions,
    private readonly events: EventEmitter<RateLimiterEvents>,
  ) {
    this.synchronous = typeof store.evaluateSync === 'function'
    this.breaker = new CircuitBreaker(options.breakerFailures, options.breakerCooldownMs)
    this.timeouts = new Timeouts(options.timeoutMs, options.timers)
    this.clock = options.clock
    this.realTimers = options.timers === REAL_TIMERS
    this.timeoutMs = options.timeoutMs
  }

  tier(plan: PolicyPlan): Tier {
    return plan.remote
  }

  call(key: string, policies: readonly Policy[], cost: number): StoreAnswer {
    // An open breaker skips the store until it lets a probe through (closed, it allows everything).
    if (this.breaker.isOpen && !this.breaker.allows(this.clock())) return this.synchronous ? undefined : RESOLVED_UNDEFINED
    if (!this.synchronous) return this.callLater(key, policies, cost, this.submit)
    let response: EvaluateResponse
    try {
      // A new request, not one kept and rewritten: the compiler removes it when it inlines the
      // store's evaluateSync, and a kept one pays a write barrier for every new key string.
      response = this.store.evaluateSync!({ key, policies, cost })
    } catch (error) {
      return this.failed(error)
    }
    this.answered()
    return response
  }

  /** Resets `key` on the store, bounded like a decision; failures are reported, never thrown. */
  reset(key: string, policies: readonly Policy[]): Promise<void> {
    if (this.breaker.isOpen && !this.breaker.allows(this.clock())) return RESOLVED_UNDEFINED
    let pending: Promise<void>
    try {
      pending = this.store.reset(key, policies)
    } catch (error) {
      return Promise.resolve(this.failed(error))
    }
    return this.timeouts.run(pending).then(
      () => this.answered(),
      (error: unknown) => this.failed(error),
    )
  }

  /** What fail-closed tells the caller to wait: until the breaker's next probe, or one cooldown. */
  closedWaitMs(): number {
    return this.breaker.isOpen ? this.breaker.waitMs(this.clock()) : this.breaker.cooldownMs
  }

  /**
   * `call`, answered by `start` instead of the store's own submit (a sync mode's engine over the
   * store), with the same timeout, breaker and events; the timeout abandons it through the function
   * `start` returned.
   */
  callVia(key: string, policies: readonly Policy[], cost: number, start: Starter): Promise<EvaluateResponse | undefined> {
    if (this.breaker.isOpen && !this.breaker.allows(this.clock())) return RESOLVED_UNDEFINED
    return this.callLater(key, policies, cost, start)
  }

  // One promise per call, answered from the store's callback or by the timeout. Closures live only
  // in functions of the asynchronous path: a function that makes one allocates its context on every
  // call, also on the paths that never make it.
  private callLater(key: string, policies: readonly Policy[], cost: number, start: Starter): Promise<EvaluateResponse | undefined> {
    return new Promise<EvaluateResponse | undefined>((resolve, reject) => {
      let abandon: (() => void) | void
      // The first of the store's answer and the timeout decides; the other finds the entry settled.
      const entry = this.timeouts.start((timeout) => {
        abandon?.()
        this.answer(resolve, reject, timeout, undefined)
      })
      // The deadline lets the store skip the charge once the timeout has answered the caller.
      const request: EvaluateRequest = { key, policies, cost, deadline: this.deadlineOf(entry) }
      try {
        abandon = start(request, (error, response) => {
          if (this.timeouts.settle(entry)) this.answer(resolve, reject, error, response)
        })
      } catch (error) {
        if (this.timeouts.settle(entry)) this.answer(resolve, reject, error, undefined)
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
  ): void {
    try {
      if (error == null && response !== undefined) {
        this.answered()
        resolve(response)
      } else {
        resolve(this.failed(error ?? new Error(NO_ANSWER)))
      }
    } catch (thrown) {
      reject(thrown)
    }
  }

  private deadlineOf(entry: TimeoutEntry): number {
    return this.realTimers ? entry.deadline : performance.now() + this.timeoutMs
  }

  private answered(): undefined {
    // Closed and no streak to end (the usual case): nothing to record.
    if (this.breaker.isOpen || this.breaker.streak > 0) {
      if (this.breaker.recordSuccess() === 'closed') this.events.emit('breaker-close')
    }
    return undefined
  }

  private failed(error: unknown): undefined {
    this.events.emit('store-error', asError(error))
    const transition = this.breaker.recordFailure(this.clock())
    if (this.breaker.isOpen) this.store.recover?.()
    if (transition === 'opened') this.events.emit('breaker-open')
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
