// The Store interface: what the limiter asks of any state backend (memory, Redis, memcached).

import type { Policy } from '../core/policy.js'
import type { PolicyRecord, PolicyResult } from '../core/evaluate.js'
import type { LeaseAsk } from '../core/lease.js'

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
   * sets it from its timeout, in these terms whatever timers it was given). A store that can (Redis,
   * memcached) charges nothing for a request that reaches it, or would be sent, later, and answers it
   * with STORE_TIMEOUT: its caller has been answered by the fallback.
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

/**
 * Units admitted elsewhere, to be charged into one key's stored state (a write-back flush; a
 * region's usage replicated to another). See `Store.merge`.
 */
export interface MergeRequest {
  key: string
  /** The key's policies; each must have a merge (core/merge.ts mergeRefusal). */
  policies: readonly Policy[]
  /**
   * Units charged into every policy's state, past the limit if need be: the requests they stand for
   * were already admitted. Negative units give back (never past a fresh state); 0 only reads.
   */
  units: number
  /** As `EvaluateRequest.now`: omitted, the store's clock (Redis: the server's). */
  now?: number
  /**
   * Who sends the units (an instance, a region); with `seq`, the merge is idempotent: a request whose
   * `seq` the store has applied from this origin is not applied again (its answer still carries the
   * state). MemoryStore keeps the last seq per record and origin; RedisStore one token per slot and
   * origin holding the seqs applied there (docs/sync.md). Send a request again with the same seq
   * until it is answered, and a newer one for the same key only after that.
   */
  origin?: string
  /** Increases with every request an origin sends, whatever its key (a whole number ≥ 0). */
  seq?: number
}

export interface MergeResponse {
  /** One per policy: the stored record after the merge, the state every instance's units are now in. */
  records: PolicyRecord[]
  /** False when the request was a replay (its seq already applied) for some policy, which it left as it was. */
  applied: boolean
  /** The `now` the store merged at. */
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
   * Optional, for a store made of shards (memcached servers on a ring, Redis Cluster masters): the
   * shard that holds every record of `key` (e.g. `10.0.0.1:11211`). The limiter keeps a circuit
   * breaker per shard, so one failing shard sends only its own keys to the failure mode. A store
   * without it is one shard, named `''`. Called on every decision: keep it cheap.
   */
  shardOf?(key: string): string
  /**
   * Optional, with `shardOf`: the shards that hold keys now. A shard that left (a Cluster master
   * whose slots a replica took over) is forgotten by the limiter when the store recovers.
   */
  shards?(): readonly string[]
  /**
   * Optional: calls `listener` whenever the backend, after failing, may answer again (Redis
   * reconnected, or a Cluster's slot map changed after a failover), with the shard that may (`''`:
   * the whole store); returns a function that removes it. The limiter then probes at once instead
   * of waiting out the breaker's cooldown.
   */
  onRecovered?(listener: (shard: string) => void): () => void
  /**
   * Optional: the caller saw the backend fail while the breaker of `shard` is open (`''`: the
   * whole store). A Redis Cluster store reads the slot map again until a replica has taken over.
   */
  recover?(shard: string): void
  /**
   * Optional: merges each request's units into its key's state and answers every record after the
   * merge, one response per request, in order (one script call per Redis node). What write-back sync
   * and region replication are built on. Rejects only when the backend fails.
   */
  merge?(batch: readonly MergeRequest[]): Promise<MergeResponse[]>
  /**
   * Optional: the limiter answered a request of `cost` for `key` from its deny cache, without
   * calling the store. A store that learns demand from its calls counts it there (region sync's
   * split mode moves allotments by demand); it must be cheap and must not throw.
   */
  noteDenied?(key: string, policies: readonly Policy[], cost: number): void
  /** Forgets all state (counters and blocks) of `key` for these policies. */
  reset(key: string, policies: readonly Policy[]): Promise<void>
  /** Releases connections and timers the store owns (not clients the caller passed in). */
  close(): Promise<void>
}

/**
 * One key's lease call (see core/lease.ts): end the caller's previous lease (`returnId`), take a
 * new one (`id`, up to `want` units, at least `need`), or with `id` 0 decide `need` exactly
 * against the same ledger. Used by the `lease` and `auto` sync modes.
 */
export interface LeaseRequest extends LeaseAsk {
  key: string
  policies: readonly Policy[]
  /** As `EvaluateRequest.now`: omitted, the store's clock (Redis: the server's) decides. */
  now?: number
  /**
   * As `EvaluateRequest.deadline`: when the decision waiting for this call stops waiting. Redis
   * neither grants nor charges anything once past it, and answers STORE_TIMEOUT.
   */
  deadline?: number
}

export interface LeaseResponse {
  /** Units granted: 0, or at least `need` (the request in hand is admitted from them). */
  granted: number
  /** When the lease ends, on the store's clock; 0 without one. */
  expiresAt: number
  /** The returned lease was live and has now ended (false: unknown, expired or ended before). */
  returned: boolean
  /** The request in hand (`need`) was admitted. */
  allowed: boolean
  /** One per policy: on a grant, what the key has left; on a denial, the denying wait. */
  results: PolicyResult[]
  /** The store's clock when it decided: `expiresAt - now` is how long the lease lives. */
  now: number
}

/** A store that can hand out leases: both built-in stores (one atomic step per key). */
export interface LeaseStore extends Store {
  /** Runs each lease call atomically per key; the answer has one response per request, in order. */
  lease(batch: readonly LeaseRequest[]): Promise<LeaseResponse[]>
  /**
   * True when `evaluate` of a key with live leases decides as `lease` with `id` 0 does (it reads the
   * key's ledgers), for every algorithm: RedisStore. `sync: 'auto'` then decides a cold token-bucket
   * or gcra key by the plain exact call (one key read, exact's cost); otherwise by `lease` with `id`
   * 0, as a plain exact step would miss the units that leases hold beside those states.
   */
  readonly exactReadsLedgers?: boolean
}
