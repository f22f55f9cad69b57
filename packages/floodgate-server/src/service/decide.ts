// The one place a domain + descriptors + hits become per-descriptor decisions (rules → limiter); shared by HTTP and gRPC.

import { createHash } from 'node:crypto'
import type { Logger } from 'pino'
import { createPolicy, type Decision, FloodgateError, type LimitOptions, type Policy } from 'floodgate'
import { type MatchedRule, storeKeyOf } from 'floodgate/rules'
import type { ServiceMetrics } from './metrics.js'

/** One descriptor entry, e.g. `{ key: 'user', value: 'alice' }`. */
export interface Entry {
  key: string
  value: string
}

/** The units Envoy's `RateLimitOverride` can name (MONTH = 30 days, YEAR = 365 days). */
export const OVERRIDE_UNIT_MS = {
  SECOND: 1_000,
  MINUTE: 60_000,
  HOUR: 3_600_000,
  DAY: 86_400_000,
  MONTH: 30 * 86_400_000,
  YEAR: 365 * 86_400_000,
} as const

export type OverrideUnit = keyof typeof OVERRIDE_UNIT_MS

/** One descriptor to decide. */
export interface DescriptorInput {
  entries: Entry[]
  /** Units to charge this descriptor; wins over the request's `hits` (Envoy's per-descriptor hits_addend). */
  hits?: number
  /** Envoy's per-descriptor limit override: a fixed window of this size in place of the configured rule. */
  limit?: { requestsPerUnit: number; unit: OverrideUnit }
}

export interface DecideInput {
  domain: string
  descriptors: DescriptorInput[]
  /** Units to charge each descriptor without its own `hits`; 0 checks without counting. */
  hits: number
}

/** The rules snapshot (a RuleSet): which rule applies to each descriptor. */
export interface RuleLookup {
  match(domain: string, descriptors: Entry[][]): (MatchedRule | undefined)[]
}

/** The limiter, as far as deciding and resetting need it. */
export interface DecisionLimiter {
  limit(key: string, options?: LimitOptions): Promise<Decision>
  reset(key: string, options?: { policies?: readonly Policy[] }): Promise<void>
}

/** The decision for one descriptor. */
export type DescriptorOutcome =
  | { kind: 'unmatched' }
  | { kind: 'unlimited'; ruleId: string }
  | {
      kind: 'limited'
      /** The matched rule's id; `override` when a request-supplied limit decided without a rule. */
      ruleId: string
      /** The matched rule, when one matched. */
      rule: MatchedRule | undefined
      /** The answer to give: false only when a non-shadow rule denies. */
      allowed: boolean
      /** A shadow-mode rule would have denied. */
      wouldDeny: boolean
      /** Allowed with at least the near-limit ratio of the limit used. */
      near: boolean
      /** The deciding policy. */
      policy: Policy
      decision: Decision
    }

export interface DecideResult {
  /** Every descriptor allowed. */
  allowed: boolean
  outcomes: DescriptorOutcome[]
}

export interface DeciderOptions {
  /** The current rules snapshot; called per request so a reload applies to the next decision. */
  rules: () => RuleLookup
  limiter: DecisionLimiter
  metrics?: ServiceMetrics
  /** Share of a limit used from which an allowed hit counts as near the limit (default 0.8). */
  nearLimitRatio?: number
  /** Gets one debug line per denial (rule, policy, hashed key); nothing is logged above debug level. */
  logger?: Pick<Logger, 'debug' | 'isLevelEnabled'>
}

const MAX_OVERRIDE_POLICIES = 1_000

/**
 * Turns requests into decisions: matches each descriptor to a rule, asks the limiter for all of
 * them concurrently (so a Redis store batches them into one round trip), applies shadow mode and
 * counts the per-rule metrics. Unmatched and unlimited descriptors never touch the store.
 */
export class Decider {
  readonly #rules: () => RuleLookup
  readonly #limiter: DecisionLimiter
  readonly #metrics: ServiceMetrics | undefined
  readonly #nearLimitRatio: number
  readonly #logger: DeciderOptions['logger']
  readonly #overridePolicies = new Map<string, Policy>()

  constructor(options: DeciderOptions) {
    this.#rules = options.rules
    this.#limiter = options.limiter
    this.#metrics = options.metrics
    this.#nearLimitRatio = options.nearLimitRatio ?? 0.8
    this.#logger = options.logger
  }

  /** Decides every descriptor of `input`; rejects with FloodgateError (INVALID_REQUEST) on an empty domain or no descriptors. */
  async decide(input: DecideInput): Promise<DecideResult> {
    if (input.domain === '') throw new FloodgateError('INVALID_REQUEST', 'domain: must not be empty; name the rules domain')
    const { domain, descriptors } = input
    if (descriptors.length === 0) throw new FloodgateError('INVALID_REQUEST', 'descriptors: give at least one descriptor')
    const entries: Entry[][] = new Array(descriptors.length)
    for (let i = 0; i < descriptors.length; i++) entries[i] = descriptors[i].entries
    const rules = this.#rules().match(domain, entries)
    // The usual request has one descriptor: no Promise.all (and its extra promises) for it.
    if (descriptors.length === 1) {
      const outcome = await this.#decideOne(domain, descriptors[0], rules[0], descriptors[0].hits ?? input.hits)
      return { allowed: admits(outcome), outcomes: [outcome] }
    }
    const outcomes = await Promise.all(descriptors.map((descriptor, i) => this.#decideOne(domain, descriptor, rules[i], descriptor.hits ?? input.hits)))
    return { allowed: outcomes.every(admits), outcomes }
  }

  /** The limited rule a descriptor matches (its policies and store key); undefined when nothing limits it. */
  resolve(domain: string, entries: Entry[]): MatchedRule | undefined {
    const rule = this.#rules().match(domain, [entries])[0]
    return rule === undefined || rule.unlimited ? undefined : rule
  }

  /** The descriptor's current state without charging or counting it (admin); undefined when nothing limits it. */
  async peek(domain: string, entries: Entry[]): Promise<{ rule: MatchedRule; decision: Decision } | undefined> {
    const rule = this.resolve(domain, entries)
    if (rule === undefined) return undefined
    return { rule, decision: await this.#limiter.limit(rule.storeKey, { cost: 0, policies: rule.policies }) }
  }

  /** Forgets the counters of the rule `entries` match; false when no limited rule matches. */
  async reset(domain: string, entries: Entry[]): Promise<boolean> {
    const rule = this.resolve(domain, entries)
    if (rule === undefined) return false
    await this.#limiter.reset(rule.storeKey, { policies: rule.policies })
    return true
  }

  async #decideOne(domain: string, descriptor: DescriptorInput, rule: MatchedRule | undefined, hits: number): Promise<DescriptorOutcome> {
    let ruleId: string
    let policies: readonly Policy[]
    let storeKey: string
    let shadow = false
    if (descriptor.limit !== undefined) {
      // As envoyproxy/ratelimit: a request-supplied limit replaces the configured one, even where no rule matched.
      ruleId = rule?.id ?? 'override'
      policies = [this.#overridePolicy(descriptor.limit.requestsPerUnit, descriptor.limit.unit)]
      storeKey = rule?.storeKey ?? storeKeyOf(domain, descriptor.entries)
    } else if (rule === undefined) {
      return { kind: 'unmatched' }
    } else if (rule.unlimited) {
      return { kind: 'unlimited', ruleId: rule.id }
    } else {
      ruleId = rule.id
      policies = rule.policies
      storeKey = rule.storeKey
      shadow = rule.shadow
    }
    const decision = await this.#limiter.limit(storeKey, { cost: hits, policies })
    const policy = policyNamed(policies, decision.policy)
    const wouldDeny = shadow ? !decision.allowed || decision.shadow : decision.shadow
    const allowed = shadow || decision.allowed
    const near = allowed && !wouldDeny && decision.limit - decision.remaining >= this.#nearLimitRatio * decision.limit
    this.#metrics?.recordHit(ruleId, { hits, allowed, near, wouldDeny, denyCache: decision.source === 'deny-cache' })
    if ((!allowed || wouldDeny) && this.#logger?.isLevelEnabled('debug')) this.#logDenial(domain, ruleId, storeKey, decision, !allowed)
    return { kind: 'limited', ruleId, rule, allowed, wouldDeny, near, policy, decision }
  }

  // The store key holds the descriptor values (user ids, IP addresses): only its hash is logged,
  // enough to tell one key's denials from another's and to match a key one hashes by hand.
  #logDenial(domain: string, ruleId: string, storeKey: string, decision: Decision, enforced: boolean): void {
    this.#logger!.debug(
      {
        domain,
        rule: ruleId,
        policy: decision.policy,
        key: keyHash(storeKey),
        retryAfterMs: decision.retryAfterMs,
        source: decision.source,
        ...(enforced ? {} : { shadow: true }),
      },
      enforced ? 'rate limited' : 'rate limited (shadow mode: allowed)',
    )
  }

  #overridePolicy(requestsPerUnit: number, unit: OverrideUnit): Policy {
    const id = `${requestsPerUnit}/${unit}`
    let policy = this.#overridePolicies.get(id)
    if (policy === undefined) {
      if (!Number.isInteger(requestsPerUnit) || requestsPerUnit < 1) {
        throw new FloodgateError('INVALID_REQUEST', `limit.requests_per_unit: must be at least 1, got ${requestsPerUnit}`)
      }
      policy = createPolicy({
        name: `override-${requestsPerUnit}-per-${unit.toLowerCase()}`,
        algorithm: 'fixed-window',
        limit: requestsPerUnit,
        period: OVERRIDE_UNIT_MS[unit],
      })
      // Overrides come from requests: keep the cache bounded however many distinct ones arrive.
      if (this.#overridePolicies.size >= MAX_OVERRIDE_POLICIES) this.#overridePolicies.clear()
      this.#overridePolicies.set(id, policy)
    }
    return policy
  }
}

/** `sha256:` and the first 16 hex digits of the key's SHA-256: `printf %s "$key" | sha256sum`. */
export function keyHash(storeKey: string): string {
  return `sha256:${createHash('sha256').update(storeKey).digest('hex').slice(0, 16)}`
}

function admits(outcome: DescriptorOutcome): boolean {
  return outcome.kind !== 'limited' || outcome.allowed
}

/** The policy the decision names (the first one if none matches, as for a fail-open decision). */
function policyNamed(policies: readonly Policy[], name: string): Policy {
  for (let i = 0; i < policies.length; i++) if (policies[i].name === name) return policies[i]
  return policies[0]
}
