// Public types of the RateLimiter: its options and the Decision every adapter reads.

import type { Duration } from '../core/duration.js'
import type { AlgorithmName, Policy, PolicyOptions } from '../core/policy.js'
import type { Store } from '../stores/store.js'
import type { Timers } from './timeout.js'

/** Which path produced a decision. */
export type DecisionSource =
  | 'store' // the store decided
  | 'deny-cache' // answered in-process: the key is known to be over its limit until retryAfterMs
  | 'fallback-open' // the store failed; onStoreError 'open' allowed it
  | 'fallback-closed' // the store failed; onStoreError 'closed' denied it
  | 'fallback-local' // the store failed; a local in-memory limiter decided
  | 'write-back' // sync: 'write-back': decided from this instance's copy of the key, flushed to the store later
  | 'lease' // sync: 'lease' or 'auto': admitted in-process from a block of units this instance leased from the store

/** One policy's part of a decision. */
export interface PolicyDecision {
  name: string
  /** The policy's algorithm: headers and messages word a concurrency limit differently from a rate. */
  algorithm: AlgorithmName
  /** The nominal limit (not the soft/elastic allowance). */
  limit: number
  periodMs: number
  allowed: boolean
  remaining: number
  resetMs: number
  retryAfterMs: number
  delayMs: number
  /** Denied because of a block period after an earlier denial. */
  blocked: boolean
  /** Admitted beyond the nominal limit (soft overage or elastic headroom). */
  over: boolean
  /** A shadow policy that would have denied; the request was allowed. */
  shadow: boolean
  /** Present (true) when this policy can never admit the request's cost; see `Decision.never`. */
  never?: boolean
}

/** A concurrency lease: hand it back with `limiter.release(lease)` when the work is done. */
export interface Lease {
  readonly key: string
  readonly cost: number
  /** Names of the concurrency policies the lease holds a slot in. */
  readonly policies: readonly string[]
  /**
   * When the lease was taken (ms since the epoch, the limiter's clock, read just before the store
   * decided). Past `acquiredAt + periodMs` the slot has expired by itself and `release` skips it.
   */
  readonly acquiredAt?: number
}

/** The answer to `limiter.limit(key)`. Every number is whole milliseconds or units, ≥ 0. */
export interface Decision {
  /**
   * Admitted, and so charged: true only when the store (or a lease it granted) took the whole cost.
   * A cost no policy could hold is denied (`never`), uncharged. Two documented exceptions admit
   * without charging: `source` 'fallback-open' (the store failed, onStoreError 'open') and shadow
   * policies (which never deny). See RateLimiter.limit.
   */
  allowed: boolean
  /** The deciding policy's nominal limit. */
  limit: number
  remaining: number
  /** Until the deciding policy is fully restored / its window ends. */
  resetMs: number
  /** 0 when allowed; otherwise the wait until this cost would pass (0 as well when `never`: no wait helps). */
  retryAfterMs: number
  /** Leaky-bucket shaping: wait this long before doing the work. */
  delayMs: number
  /** Name of the deciding policy: the denying one, or the tightest when allowed. */
  policy: string
  over: boolean
  shadow: boolean
  source: DecisionSource
  /** Every policy's part, in the limiter's order. */
  policies: PolicyDecision[]
  /**
   * Present (true) when the request can never be admitted as it is: its cost exceeds what an
   * enforced policy admits even to a fresh key (e.g. cost 10 against a burst of 5). No wait helps,
   * so `retryAfterMs` is 0 and means "do not retry this cost" (Infinity would not survive JSON);
   * `policy` names the policy, `remaining` and `resetMs` still describe the key. Nothing was charged
   * and no block period started. HTTP answers say it with 413 and no `Retry-After`.
   */
  never?: boolean
  /** Present when a concurrency policy admitted the request. */
  lease?: Lease
}

export interface LimitOptions {
  /** Units to charge (default 1); 0 peeks without charging. */
  cost?: number
  /** Decide with these policies instead of the limiter's own (the rules engine uses this). */
  policies?: readonly Policy[]
}

/** What the limiter does when the store fails or times out. */
export type OnStoreError = 'open' | 'closed' | 'local'

export interface RateLimiterOptions {
  /** Where state lives; defaults to a new MemoryStore. */
  store?: Store
  /** The policies of every key, decided all-or-nothing. Optional only if every call passes its own. */
  policies?: readonly PolicyOptions[]
  /**
   * How long a store call may take before the failure mode applies. By default adaptive, between
   * `min` 100ms and `max` 2s: a call times out once it waited 3× the store's slowest recent answer
   * (at least `min`) while the store answered nothing else, or once it waited `max` (see
   * docs/failure-modes.md). A slow store thus keeps deciding; a silent one fails over quickly.
   * One duration is a fixed timeout: every call times out after exactly that.
   */
  timeout?: Duration | { min?: Duration; max?: Duration }
  /** Behaviour when the store fails: allow (`open`, default), deny (`closed`) or decide locally (`local`). */
  onStoreError?: OnStoreError
  /** For `local`: divide each limit by this many instances (default 1), so the fleet stays near the global limit. */
  instances?: number
  /**
   * Circuit breaker: consecutive failures before the store is skipped (default 5), and how long
   * until a probe (default 5s). A store that reports it answers again (RedisStore: its client
   * reconnected, or a Cluster's slot map changed after a failover) is probed at once instead.
   */
  breaker?: { failures?: number; cooldown?: Duration }
  /** In-process cache of keys known to be over their limit; `false` disables it. */
  denyCache?: { maxKeys?: number } | false
  /**
   * Per-instance bound of the policies' sync modes: `maxKeys` (default 100 000) is the most keys
   * write-back holds local copies of, and the most keys `lease`/`auto` follow. Past it, write-back
   * drops the oldest key with nothing left to send (with none, a new key is decided by
   * `onStoreError`), and the lease engine gives back the oldest key's lease (docs/sync.md).
   */
  sync?: { maxKeys?: number }
  /**
   * For `elastic` policies: the shared pool that says whether the system has spare capacity (a
   * RateLimiter; one that `canLimitSync` is asked synchronously), and the key it is asked with
   * (default 'elastic-pool').
   */
  pool?: { limiter: PoolLimiter; key?: string }
  /** Milliseconds since the epoch for the deny cache, breaker and local fallback (default `Date.now`); tests inject one. */
  clock?: () => number
  /**
   * The monotonic clock and timer the store timeout runs on (default `performance.now()` and
   * `setTimeout`). Tests inject manual ones, so that no timeout races the machine's load.
   */
  timers?: Timers
  /**
   * Called as each call to the store starts (not for answers from the deny cache, a lease or the
   * fallback), with the key and cost; the function it returns, if any, is called once the call is
   * answered, with whether it failed (an error or the timeout). For tracing: the service opens a
   * span here, so the library itself depends on no tracing package.
   */
  onStoreCall?: StoreCallHook
}

/** See `RateLimiterOptions.onStoreCall`. */
export type StoreCallHook = (key: string, cost: number) => ((failed: boolean) => void) | undefined

/** What the elastic pool must offer: a RateLimiter does. */
export interface PoolLimiter {
  limit(key: string, options?: LimitOptions): Promise<Decision>
  limitSync?(key: string, options?: LimitOptions): Decision
  /** True when `limitSync` answers for the pool's policies (then it is used). */
  readonly canLimitSync?: boolean
}

/** Events a RateLimiter emits, for metrics and logs. */
export interface RateLimiterEvents {
  /** The store failed or timed out (the failure mode then decided). */
  'store-error': [error: Error]
  /**
   * A circuit breaker opened: calls for the keys of `shard` skip the store until its cooldown
   * passes. `shard` is `''` for a store that is one shard (memory, standalone or Sentinel Redis),
   * else the failing memcached server or Redis Cluster master (`host:port`), whose keys alone go
   * to the failure mode.
   */
  'breaker-open': [shard: string]
  /**
   * A probe succeeded: calls for the keys of `shard` go to the store again (also announced for a
   * Cluster master whose slots a replica took over, once the store has moved its keys there).
   */
  'breaker-close': [shard: string]
  /** A decision was made without the store, by the failure mode named by `source`. */
  fallback: [source: DecisionSource]
  /**
   * A `limit()` or `limitSync()` call was answered (peeks included: `cost` 0), with the
   * milliseconds from the call to its answer (on `timers.now`). Measured only while something
   * listens, so an unwatched limiter pays nothing.
   */
  decision: [key: string, decision: Decision, cost: number, elapsedMs: number]
}
