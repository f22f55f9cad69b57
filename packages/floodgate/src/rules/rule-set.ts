// RuleSet: an immutable snapshot of loaded rules that answers "which limit applies to this descriptor?".

import { boundedKey } from '../core/bounded-key.js'
import type { Policy } from '../core/policy.js'
import { compileLevel, findRule, type DescriptorEntry, type Level } from './match.js'
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
  constructor(configs: readonly DomainConfig[], files: readonly string[]) {
    this.configs = configs
    this.files = Object.freeze([...files])
    this.roots = new Map(configs.map((config) => [config.domain, compileLevel(config.descriptors)]))
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
    const templates = descriptors.map((entries) => findRule(root, entries))
    const replaced = replacedNames(templates)
    for (let i = 0; i < descriptors.length; i++) {
      const template = templates[i]
      if (template === undefined) continue
      const policies = replaced === undefined ? template.policies : survivingPolicies(template, replaced)
      if (policies === undefined) continue
      results[i] = toMatchedRule(template, policies, storeKeyOf(domain, descriptors[i]))
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
      replaces: [...rule.replaces],
      envoyLimit: rule.envoy && { ...rule.envoy },
      policies: rule.policies.map((policy) => ({ ...policy })),
    },
    descriptors: descriptor.descriptors.map(describeDescriptor),
  }
}

/** Names replaced by the matched, limited rules of one request; `undefined` when none (the usual case). */
function replacedNames(templates: readonly (RuleTemplate | undefined)[]): Set<string> | undefined {
  let names: Set<string> | undefined
  for (const template of templates) {
    if (template === undefined || template.unlimited || template.replaces.length === 0) continue
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

function toMatchedRule(template: RuleTemplate, policies: readonly Policy[], storeKey: string): MatchedRule {
  const rule: MatchedRule = {
    id: template.id,
    // Frozen at load time; the mutable type is the public contract, the freeze guards sharing.
    policies: policies as Policy[],
    unlimited: template.unlimited,
    shadow: template.shadow,
    detailedMetric: template.detailedMetric,
    storeKey,
  }
  if (template.name !== undefined) rule.name = template.name
  if (template.envoy !== undefined) rule.envoyLimit = template.envoy
  return rule
}

const HAS_SEPARATOR = /[\\|=]/
const SEPARATORS = /[\\|=]/g

/**
 * `domain|key=value|key=value`, with `\`, `|` and `=` inside any part escaped by a backslash, so
 * each key is one exact reading of (domain, entries) and no two requests collide. Values come from
 * clients: a key longer than 256 characters is hashed (`boundedKey`), so the store keeps 39
 * characters for it, not the whole request.
 */
export function storeKeyOf(domain: string, entries: readonly DescriptorEntry[]): string {
  let key = escapePart(domain)
  for (const entry of entries) key += `|${escapePart(entry.key)}=${escapePart(entry.value)}`
  return boundedKey(key)
}

function escapePart(text: string): string {
  return HAS_SEPARATOR.test(text) ? text.replace(SEPARATORS, (c) => `\\${c}`) : text
}
