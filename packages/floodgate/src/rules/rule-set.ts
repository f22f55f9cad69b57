// RuleSet: an immutable snapshot of loaded rules that answers "which limit applies to this descriptor?".

import { boundedKey } from '../core/bounded-key.js'
import type { Policy } from '../core/policy.js'
import { compileLevel, findRule, type DescriptorEntry, type Level, type RuleMatch, type WildcardOrder } from './match.js'
import type { DescriptorConfig, DomainConfig, RuleTemplate } from './schema.js'
import type { EnvoyUnit } from './units.js'

/** The rule that applies to one request descriptor. */
export interface MatchedRule {
  /**
   * Stable, bounded-cardinality id for metrics labels: domain + matched config path, e.g.
   * "edge.remote_address" or "edge.plan_premium.user". Wildcard and key-only branches use the
   * config text, never the request's value.
   */
  id: string
  /** rate_limit.name if given. */
  name?: string
  /**
   * Validated policies for this descriptor; empty when unlimited or allow-listed. Shared between
   * requests and frozen: copy before changing.
   */
  policies: Policy[]
  /** `unlimited: true` or an allow-listed value entry (no rate_limit, no children): never touches the store. */
  unlimited: boolean
  /**
   * Set when `unlimited` comes from an allow-listed value entry rather than `unlimited: true`:
   * envoyproxy/ratelimit finds no limit there and answers `limit_remaining` 0, not the largest uint32.
   */
  allowListed?: true
  /** `shadow_mode: true`: decide and count, but never deny (its policies carry `shadow` too). */
  shadow: boolean
  /** `detailed_metric: true`: the operator wants per-value metrics for this rule. */
  detailedMetric: boolean
  /**
   * The store key for this request descriptor: domain + every entry's key and actual request
   * value (a wildcard or key-only match still uses the request's value, as envoyproxy/ratelimit
   * does), escaped so values containing separators cannot collide.
   */
  storeKey: string
  /** For `rate_limit` rules: the limit as Envoy states it (`current_limit` in a DescriptorStatus). */
  envoyLimit?: { unit: EnvoyUnit; requestsPerUnit: number }
  /**
   * The stats key envoyproxy/ratelimit counts this hit under: `id`, unless the path has
   * `value_to_metric` or `share_threshold` or the rule has `detailed_metric`, which put request
   * values (or the shared pattern) in it. Bounded by the config only when none of those is set.
   */
  metricKey: string
  /** `quota_mode: true` (see RuleTemplate.quota). */
  quota: boolean
  /** The descriptor's `metadata:`, when written. */
  metadata?: Readonly<Record<string, unknown>>
}

/** Options of a RuleSet (and of `parseRules`, `loadRules`, `RuleWatcher`). */
export interface RuleSetOptions {
  /**
   * Which of several wildcard values of one key wins: `file` (default, as envoyproxy/ratelimit:
   * the first in file order) or `specific` (the most literal characters first).
   */
  wildcardOrder?: WildcardOrder
  /**
   * A domain may be spread over several files, its descriptors merged (envoyproxy/ratelimit's
   * MERGE_DOMAIN_CONFIG); a top-level descriptor defined twice is still an error. Default: one file per domain.
   */
  mergeDomains?: boolean
}

/**
 * An immutable snapshot of one or more rules files. Built by `parseRules` / `loadRules`; a reload
 * builds a new one rather than changing this one, so a request never sees half a config.
 */
export class RuleSet {
  readonly domains: ReadonlySet<string>
  /** The files the snapshot was built from, in load order. */
  readonly files: readonly string[]
  private readonly roots: ReadonlyMap<string, Level | undefined>
  private readonly configs: readonly DomainConfig[]

  /** Prefer `parseRules` / `loadRules`, which validate; this trusts its input. */
  constructor(configs: readonly DomainConfig[], files: readonly string[], options: RuleSetOptions = {}) {
    this.configs = configs
    this.files = Object.freeze([...files])
    const order = options.wildcardOrder ?? 'file'
    this.roots = new Map(configs.map((config) => [config.domain, compileLevel(config.descriptors, order)]))
    this.domains = new Set(this.roots.keys())
  }

  /**
   * One result per request descriptor, in order; `undefined` = no rule matches (Envoy answers OK
   * with no limit). Applies `replaces` across the descriptors of the request: a matched
   * rate_limit with `replaces: [{ name: X }]` removes the rule named X from the other descriptors
   * (and a policy named X from `limits:` rules; a rule left with no policy is removed).
   */
  match(domain: string, descriptors: readonly (readonly DescriptorEntry[])[]): (MatchedRule | undefined)[] {
    const results: (MatchedRule | undefined)[] = new Array(descriptors.length).fill(undefined)
    if (!this.roots.has(domain)) return results
    const root = this.roots.get(domain)
    const matches = descriptors.map((entries) => findRule(root, domain, entries))
    const replaced = replacedNames(matches)
    for (let i = 0; i < descriptors.length; i++) {
      const match = matches[i]
      if (match === undefined) continue
      const policies = replaced === undefined ? match.template.policies : survivingPolicies(match.template, replaced)
      if (policies === undefined) continue
      results[i] = toMatchedRule(match, policies, storeKeyOf(domain, descriptors[i], match.shared))
    }
    return results
  }

  /** A JSON-friendly description of the loaded rules (admin endpoint). */
  describe(): RuleSetDescription {
    return {
      files: [...this.files],
      domains: this.configs.map((config) => ({
        domain: config.domain,
        file: config.file,
        line: config.line,
        descriptors: config.descriptors.map(describeDescriptor),
      })),
    }
  }
}

/** What `RuleSet.describe()` returns. */
export interface RuleSetDescription {
  files: string[]
  domains: { domain: string; file: string; line?: number; descriptors: DescriptorDescription[] }[]
}

export interface DescriptorDescription {
  key: string
  value?: string
  line?: number
  rule?: {
    id: string
    name?: string
    unlimited: boolean
    shadow: boolean
    detailedMetric: boolean
    quota: boolean
    metadata?: Readonly<Record<string, unknown>>
    replaces: string[]
    envoyLimit?: { unit: EnvoyUnit; requestsPerUnit: number }
    policies: Policy[]
  }
  descriptors: DescriptorDescription[]
}

function describeDescriptor(descriptor: DescriptorConfig): DescriptorDescription {
  const { rule } = descriptor
  return {
    key: descriptor.key,
    value: descriptor.value,
    line: descriptor.line,
    rule: rule && {
      id: rule.id,
      name: rule.name,
      unlimited: rule.unlimited,
      shadow: rule.shadow,
      detailedMetric: rule.detailedMetric,
      quota: rule.quota,
      metadata: rule.metadata,
      replaces: [...rule.replaces],
      envoyLimit: rule.envoy && { ...rule.envoy },
      policies: rule.policies.map((policy) => ({ ...policy })),
    },
    descriptors: descriptor.descriptors.map(describeDescriptor),
  }
}

/** Names replaced by the matched rules of one request (unlimited ones too, as upstream); `undefined` when none (the usual case). */
function replacedNames(matches: readonly (RuleMatch | undefined)[]): Set<string> | undefined {
  let names: Set<string> | undefined
  for (const match of matches) {
    const template = match?.template
    if (template === undefined || template.replaces.length === 0) continue
    names ??= new Set()
    for (const name of template.replaces) names.add(name)
  }
  return names
}

/** The policies of a rule once `replaces` is applied; `undefined` when the rule is dropped. */
function survivingPolicies(template: RuleTemplate, replaced: ReadonlySet<string>): readonly Policy[] | undefined {
  // As upstream: unlimited rules answer OK whatever else the request replaces.
  if (template.unlimited) return template.policies
  if (template.name !== undefined) return replaced.has(template.name) ? undefined : template.policies
  if (!template.policies.some((policy) => replaced.has(policy.name))) return template.policies
  const kept = template.policies.filter((policy) => !replaced.has(policy.name))
  return kept.length === 0 ? undefined : Object.freeze(kept)
}

function toMatchedRule(match: RuleMatch, policies: readonly Policy[], storeKey: string): MatchedRule {
  const { template } = match
  const rule: MatchedRule = {
    id: template.id,
    // Frozen at load time; the mutable type is the public contract, the freeze guards sharing.
    policies: policies as Policy[],
    unlimited: template.unlimited,
    shadow: template.shadow,
    detailedMetric: template.detailedMetric,
    storeKey,
    metricKey: match.metricKey,
    quota: template.quota,
  }
  if (template.name !== undefined) rule.name = template.name
  if (template.allowListed) rule.allowListed = true
  if (template.envoy !== undefined) rule.envoyLimit = template.envoy
  if (template.metadata !== undefined) rule.metadata = template.metadata
  return rule
}

const HAS_SEPARATOR = /[\\|=]/
const SEPARATORS = /[\\|=]/g

/**
 * `domain|key=value|key=value`, with `\`, `|` and `=` inside any part escaped by a backslash, so
 * each key is one exact reading of (domain, entries) and no two requests collide. `shared` puts a
 * `share_threshold` pattern in place of the request's value, so every value it matches shares one counter.
 * Values come from clients: a key longer than 256 characters is hashed (`boundedKey`), so the store
 * keeps 39 characters for it, not the whole request.
 */
export function storeKeyOf(domain: string, entries: readonly DescriptorEntry[], shared?: readonly (string | undefined)[]): string {
  let key = escapePart(domain)
  for (let i = 0; i < entries.length; i++) key += `|${escapePart(entries[i].key)}=${escapePart(shared?.[i] ?? entries[i].value)}`
  return boundedKey(key)
}

function escapePart(text: string): string {
  return HAS_SEPARATOR.test(text) ? text.replace(SEPARATORS, (c) => `\\${c}`) : text
}
