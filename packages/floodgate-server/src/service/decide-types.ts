// What the Decider takes and answers: descriptors in, per-descriptor outcomes out (decide.ts).

import type { Logger } from 'pino'
import type { Decision, LimitOptions, Policy } from 'floodgate'
import type { EnvoyUnit, MatchedRule } from 'floodgate/rules'
import type { HitCounts, ServiceMetrics } from './metrics.js'

/** One descriptor entry, e.g. `{ key: 'user', value: 'alice' }`. */
export interface Entry {
  key: string
  value: string
}

/** One descriptor to decide. */
export interface DescriptorInput {
  entries: Entry[]
  /** Units to charge this descriptor; wins over the request's `hits` (Envoy's per-descriptor hits_addend). */
  hits?: number
  /** Envoy's per-descriptor limit override: a fixed window of this size in place of the configured rule. */
  limit?: { requestsPerUnit: number; unit: EnvoyUnit }
}

export interface DecideInput {
  domain: string
  descriptors: DescriptorInput[]
  /** Units to charge each descriptor without its own `hits`; 0 checks without counting. */
  hits: number
  /** The request's hits_addend as sent (0 when not given), for dynamic metadata. */
  requestHits?: number
}

/** The rules snapshot (a RuleSet): which rule applies to each descriptor. */
export interface RuleLookup {
  readonly domains: ReadonlySet<string>
  match(domain: string, descriptors: Entry[][]): (MatchedRule | undefined)[]
}

/** The limiter, as far as deciding and resetting need it. */
export interface DecisionLimiter {
  limit(key: string, options?: LimitOptions): Promise<Decision>
  reset(key: string, options?: { policies?: readonly Policy[] }): Promise<void>
}

/**
 * An Envoy-style answer for a descriptor decided with upstream's fixed-window counting (a
 * `rate_limit` rule or a request's override): the numbers envoyproxy/ratelimit would report.
 */
export interface EnvoyStatus {
  unit: EnvoyUnit
  requestsPerUnit: number
  /** `current_limit.name`: the rule's `rate_limit.name`; '' for an override, as upstream. */
  name: string
  /** The window's count after this request's hits. */
  count: number
  /** Over the limit (`count > requestsPerUnit`), shadow mode aside. */
  over: boolean
}

/** The decision for one descriptor. */
export type DescriptorOutcome =
  /**
   * No rule applies. `replaced` names the rule that matched but that another descriptor's rule of
   * the same request removed with `replaces` (upstream then applies no limit either).
   */
  | { kind: 'unmatched'; replaced?: string }
  /** `allowListed`: a value entry with no limit of its own, not `unlimited: true` (Envoy answers them apart). */
  | { kind: 'unlimited'; ruleId: string; allowListed?: true }
  | {
      kind: 'limited'
      /** The matched rule's id; `override` when a request-supplied limit decided without a rule. */
      ruleId: string
      /** The matched rule, when one matched (not for an override). */
      rule: MatchedRule | undefined
      /** The answer to give for this descriptor: false when a non-shadow rule denies (quota rules included). */
      allowed: boolean
      /** A shadow-mode rule would have denied. */
      wouldDeny: boolean
      /** Allowed with at least the near-limit ratio of the limit used. */
      near: boolean
      /** `quota_mode`: this descriptor's denial only counts when every quota descriptor is over (absent: false). */
      quota?: boolean
      /** The deciding policy. */
      policy: Policy
      decision: Decision
      /** Present for upstream-style (fixed-window counting) descriptors. */
      envoy?: EnvoyStatus
    }

export interface DecideResult {
  /** The request's overall answer (quota and global shadow mode applied). */
  allowed: boolean
  outcomes: DescriptorOutcome[]
}

/** What a decision made without the store (the limiter's failure mode) becomes. */
export type StoreErrorHandling = 'answer' | 'error'

export interface DecideOptions {
  /** `error`: reject with STORE_UNAVAILABLE instead of the failure mode's answer (default `answer`). */
  storeError?: StoreErrorHandling
}

export interface DeciderOptions {
  /** The current rules snapshot; called per request so a reload applies to the next decision. */
  rules: () => RuleLookup
  limiter: DecisionLimiter
  metrics?: ServiceMetrics
  /** Share of a limit used from which an allowed hit counts as near the limit (default 0.8). */
  nearLimitRatio?: number
  /**
   * Upstream's STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: when a request takes some descriptor over
   * its limit, the descriptors that stay within it are not charged (default false).
   */
  stopIncrementWhenOverLimit?: boolean
  /** Upstream's SHADOW_MODE: the overall answer is never OVER_LIMIT (descriptors still say so). */
  globalShadowMode?: boolean
  /** Upstream's QUOTA_MODE: every descriptor is a quota descriptor. */
  globalQuotaMode?: boolean
  /** Most descriptors in one request (default 64). */
  maxDescriptors?: number
  /** Most entries in one descriptor (default 32). */
  maxEntries?: number
  /** Gets one debug line per denial (rule, policy, hashed key); nothing is logged above debug level. */
  logger?: Pick<Logger, 'debug' | 'isLevelEnabled'>
  /** Also gets each limited descriptor's hits, as the metrics count them, with its store key (the dashboard). */
  observer?: (metricKey: string, storeKey: string, counts: HitCounts) => void
}
