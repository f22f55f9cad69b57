// The typed tree a rules file validates into: domains, their descriptors, and the rule each applies.

import type { Policy } from '../core/policy.js'
import type { EnvoyUnit } from './units.js'

/** What a matched descriptor applies; shared by every request that matches it. */
export interface RuleTemplate {
  /** Bounded-cardinality id: domain + config path (`edge.plan_premium.user`). */
  readonly id: string
  readonly name: string | undefined
  readonly policies: readonly Policy[]
  readonly unlimited: boolean
  /** An allow-listed value (no limit of its own): unlimited, but Envoy answers it as "no limit" (remaining 0), as upstream. */
  readonly allowListed?: true
  readonly shadow: boolean
  readonly detailedMetric: boolean
  /** Names of limits this rule removes from the other descriptors of the same request. */
  readonly replaces: readonly string[]
  /** The Envoy-style limit, for `rate_limit` rules only (Envoy's `current_limit`). */
  readonly envoy: { unit: EnvoyUnit; requestsPerUnit: number } | undefined
  /**
   * `quota_mode: true`: an over-limit answer for this descriptor denies the request only when every
   * quota descriptor of the request is over (upstream's quota mode).
   */
  readonly quota: boolean
  /** `metadata:` written on the descriptor (JSON-like), for Envoy's dynamic metadata; `undefined` when none. */
  readonly metadata: Readonly<Record<string, unknown>> | undefined
}

/** One validated descriptor entry of the config tree. */
export interface DescriptorConfig {
  readonly key: string
  /** `undefined` when the entry gives only a key (matches any value of that key). */
  readonly value: string | undefined
  /** Where it was written, for the admin description. */
  readonly line: number | undefined
  readonly rule: RuleTemplate | undefined
  readonly descriptors: readonly DescriptorConfig[]
  /** `value_to_metric: true`: metric keys name the request's value at this level, not the config's. */
  readonly valueToMetric: boolean
  /** `share_threshold: true` (wildcard values only): every value the pattern matches shares one counter. */
  readonly shareThreshold: boolean
}

/** One validated file: a domain and its tree. */
export interface DomainConfig {
  readonly domain: string
  readonly file: string
  readonly line: number | undefined
  readonly descriptors: readonly DescriptorConfig[]
}
