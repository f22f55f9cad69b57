// Floodgate's main entry: the RateLimiter, the embedded MemoryStore, policies, durations, errors and public types.

export { RateLimiter } from './limiter/rate-limiter.js'
export { MemoryStore, type MemoryStoreOptions } from './stores/memory/memory-store.js'
export { createPolicy, createPolicies, ALGORITHMS } from './core/policy.js'
export type { AlgorithmName, Mode, Policy, PolicyOptions } from './core/policy.js'
export { REGION_MODES, type RegionMode } from './core/regions.js'
export type { SyncMode } from './core/sync.js'
export { SYNC_MODES, SYNC_DEFAULTS } from './core/sync.js'
export { parseDuration, formatDuration } from './core/duration.js'
export { boundedKey, MAX_PLAIN_KEY_LENGTH } from './core/bounded-key.js'
export type { Duration, DurationUnit } from './core/duration.js'
export { FloodgateError, type FloodgateErrorCode } from './core/errors.js'
export type {
  Store,
  EvaluateRequest,
  EvaluateResponse,
  SubmitCallback,
  LeaseStore,
  LeaseRequest,
  LeaseResponse,
  MergeRequest,
  MergeResponse,
} from './stores/store.js'
export type { PolicyResult } from './core/evaluate.js'
export type {
  Decision,
  DecisionSource,
  Lease,
  LimitOptions,
  OnStoreError,
  PolicyDecision,
  PoolLimiter,
  RateLimiterEvents,
  RateLimiterOptions,
  StoreCallHook,
} from './limiter/types.js'
export type { TimerHandle, Timers } from './limiter/timeout.js'
export type { LeaseState, SyncState, WriteBackState } from './limiter/sync-state.js'
