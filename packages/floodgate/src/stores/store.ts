// The Store interface: what the limiter asks of any state backend (memory, Redis).

import type { Policy } from '../core/policy.js'
import type { PolicyResult } from '../core/evaluate.js'

/** One key's decision request: every policy of the key is decided together, all-or-nothing. */
export interface EvaluateRequest {
  key: string
  policies: readonly Policy[]
  /** > 0 charges, 0 peeks, < 0 refunds (see src/core/algorithms/types.ts). */
  cost: number
  /**
   * Milliseconds since the epoch. Omitted: the store's clock decides (Redis: the server's
   * `TIME`, so app servers with skewed clocks agree; memory: `Date.now()`). Tests pass it.
   */
  now?: number
  /**
   * When the caller stops waiting for the answer, as a `performance.now()` value (the limiter
   * sets it from its timeout, in these terms whatever timers it was given). A store that can (Redis) charges nothing for a request that reaches
   * it later, and answers it with STORE_TIMEOUT: its caller has been answered by the fallback.
   */
  deadline?: number
}

export interface EvaluateResponse {
  allowed: boolean
  /** One per policy, in the request's order. */
  results: PolicyResult[]
  /** The `now` the store decided at. */
  now: number
}

/** How `Store.submit` answers: `(null, response)`, or `(error)`. */
export type SubmitCallback = (error: unknown, response?: EvaluateResponse) => void

export interface Store {
  /**
   * Decides a batch of independent requests; the answer has one response per request, in order.
   * Rejects (throws) only when the backend fails: the limiter turns that into a failure mode.
   */
  evaluate(batch: readonly EvaluateRequest[]): Promise<EvaluateResponse[]>
  /**
   * Optional, for a store that decides in-process: decides one request like `evaluate([request])`,
   * synchronously. A store offering it is called through it alone (no promise, no timeout: a
   * synchronous call cannot be interrupted), and `limiter.limitSync` works on it. Throws only when
   * the backend fails, like `evaluate` rejects.
   *
   * The answer may be a scratch object the store reuses: it is valid until the store's next call,
   * and the caller copies what it keeps. The request is the caller's and may be reused after the call.
   */
  evaluateSync?(request: EvaluateRequest): EvaluateResponse
  /**
   * Optional: decides one request like `evaluate([request])`, but answers by calling `done` once:
   * `done(null, response)`, or `done(error)` when the backend fails. A limiter uses it when the store
   * has it, because it saves the promises of every layer on each decision.
   */
  submit?(request: EvaluateRequest, done: SubmitCallback): void
  /**
   * Optional: calls `listener` whenever the backend, after failing, may answer again (Redis
   * reconnected, or a Cluster's slot map changed after a failover); returns a function that
   * removes it. The limiter then probes at once instead of waiting out its breaker's cooldown.
   */
  onRecovered?(listener: () => void): () => void
  /**
   * Optional: the caller saw the backend fail while its breaker is open. A Redis Cluster store
   * reads the slot map again until a replica has taken over.
   */
  recover?(): void
  /** Forgets all state (counters and blocks) of `key` for these policies. */
  reset(key: string, policies: readonly Policy[]): Promise<void>
  /** Releases connections and timers the store owns (not clients the caller passed in). */
  close(): Promise<void>
}
