// The one place a domain + descriptors + hits become per-descriptor decisions (rules → limiter); shared by HTTP and gRPC.

import { createHash } from 'node:crypto'
import type { Logger } from 'pino'
import { createPolicy, type Decision, FloodgateError, type LimitOptions, type Policy } from 'floodgate'
import { envoyPolicyName, type EnvoyUnit, type MatchedRule, storeKeyOf, UNIT_MS } from 'floodgate/rules'
import { COUNT_CEILING, countOf, type EnvoyLimit, envoyLimitOf, overrideMetricKey, reportedDecision } from './envoy-counter.js'
import { floodgateCounts, nearLimitThreshold, upstreamCounts } from './hit-counts.js'
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

/** Counter policies kept for reuse (each distinct unit and rate, overrides included). */
const MAX_COUNTER_POLICIES = 1024

/**
 * Turns requests into decisions: matches each descriptor to a rule, asks the limiter for all of
 * them concurrently (so a Redis store batches them into one round trip), applies shadow and quota
 * mode and counts the per-rule metrics. Unmatched and unlimited descriptors never touch the store.
 *
 * Two counting models live side by side. A `rate_limit` rule (envoyproxy/ratelimit's format) and
 * an Envoy override count as upstream's fixed window does: every hit is added, denied ones too,
 * then the count is compared with the limit, so `limit_remaining` is 0 once over and a
 * "check with 0 hits, charge later" client sees the overage. A `limits:` rule keeps Floodgate's
 * model: all-or-nothing across its policies, denied hits not charged.
 */
export class Decider {
  readonly #rules: () => RuleLookup
  readonly #limiter: DecisionLimiter
  readonly #metrics: ServiceMetrics | undefined
  readonly #nearLimitRatio: number
  readonly #stopIncrement: boolean
  readonly #globalShadow: boolean
  readonly #globalQuota: boolean
  readonly #maxDescriptors: number
  readonly #maxEntries: number
  readonly #logger: DeciderOptions['logger']
  readonly #observer: DeciderOptions['observer']
  /**
   * The never-denying counter of each unit, shared by rules and overrides of that unit (one per
   * unit), as the one-policy array the limiter is given: the same array each time, so the
   * limiter's plan for it is built once.
   */
  readonly #counters = new Map<string, readonly [Policy]>()
  /** The same arrays by the rule limit they count for, so a rule's descriptor finds its counter without a key. */
  readonly #ruleCounters = new WeakMap<NonNullable<MatchedRule['envoyLimit']>, readonly [Policy]>()
  /** Policy sets whose every policy is shadow, as non-shadow copies: the decider applies shadow mode itself. */
  readonly #unshadowed = new WeakMap<readonly Policy[], readonly Policy[]>()

  constructor(options: DeciderOptions) {
    this.#rules = options.rules
    this.#limiter = options.limiter
    this.#metrics = options.metrics
    this.#nearLimitRatio = options.nearLimitRatio ?? 0.8
    this.#stopIncrement = options.stopIncrementWhenOverLimit ?? false
    this.#globalShadow = options.globalShadowMode ?? false
    this.#globalQuota = options.globalQuotaMode ?? false
    this.#maxDescriptors = options.maxDescriptors ?? 64
    this.#maxEntries = options.maxEntries ?? 32
    this.#logger = options.logger
    this.#observer = options.observer
  }

  /**
   * Decides every descriptor of `input`. Rejects with FloodgateError: INVALID_REQUEST on an empty
   * domain, no descriptors or too many; STORE_UNAVAILABLE when `storeError` is `error` and the
   * store could not decide.
   */
  async decide(input: DecideInput, options: DecideOptions = {}): Promise<DecideResult> {
    this.#validate(input)
    const { domain, descriptors } = input
    const entries: Entry[][] = new Array(descriptors.length)
    for (let i = 0; i < descriptors.length; i++) entries[i] = descriptors[i].entries
    const lookup = this.#rules()
    const rules = lookup.match(domain, entries)
    // As upstream: an override applies only in a domain the config knows.
    const knownDomain = lookup.domains.has(domain)
    const plans = descriptors.map((descriptor, i) => this.#plan(domain, descriptor, rules[i], knownDomain, descriptor.hits ?? input.hits))
    if (plans.length > 1) markReplaced(plans, rules, (i) => lookup.match(domain, [entries[i]])[0])
    if (this.#stopIncrement) await this.#holdBackWithinLimit(plans)
    let outcomes: DescriptorOutcome[]
    // The store's answers become outcomes here, in this one async function: an async function per
    // descriptor would add its own promise and suspended frame to every request. The usual request
    // has one descriptor: no Promise.all (and its extra promises) for it.
    if (plans.length === 1) {
      const plan = plans[0]
      outcomes = [plan.kind === 'done' ? plan.outcome : this.#outcome(plan, await this.#ask(plan))]
    } else {
      const decisions = await Promise.all(plans.map((plan) => (plan.kind === 'done' ? undefined : this.#ask(plan))))
      outcomes = plans.map((plan, i) => (plan.kind === 'done' ? plan.outcome : this.#outcome(plan, decisions[i] as Decision)))
    }
    if (options.storeError === 'error') {
      for (const outcome of outcomes) {
        if (outcome.kind === 'limited' && outcome.decision.source.startsWith('fallback')) {
          this.#metrics?.recordRequestError('store')
          throw new FloodgateError('STORE_UNAVAILABLE', 'the rate limit store did not answer in time; no decision was made')
        }
      }
    }
    for (const plan of plans) this.#record(plan)
    return { allowed: this.#overall(outcomes), outcomes }
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

  #validate(input: DecideInput): void {
    if (input.domain === '') throw this.#invalid('domain: must not be empty; name the rules domain')
    const { descriptors } = input
    if (descriptors.length === 0) throw this.#invalid('descriptors: give at least one descriptor')
    if (descriptors.length > this.#maxDescriptors) {
      throw this.#invalid(
        `descriptors: ${descriptors.length} descriptors in one request; at most ${this.#maxDescriptors} are accepted (--max-descriptors)`,
      )
    }
    for (let i = 0; i < descriptors.length; i++) {
      const count = descriptors[i].entries.length
      if (count > this.#maxEntries) {
        throw this.#invalid(
          `descriptors[${i}].entries: ${count} entries; at most ${this.#maxEntries} are accepted per descriptor (--max-descriptor-entries)`,
        )
      }
    }
  }

  #invalid(message: string): FloodgateError {
    this.#metrics?.recordRequestError('service')
    return new FloodgateError('INVALID_REQUEST', message)
  }

  /** What to ask the store for one descriptor, before asking. */
  #plan(domain: string, descriptor: DescriptorInput, rule: MatchedRule | undefined, knownDomain: boolean, hits: number): Plan {
    const override = knownDomain ? descriptor.limit : undefined
    if (override !== undefined) {
      // As upstream: a request-supplied limit replaces the configured one (even where no rule
      // matched), is never shadow, has no name, and counts under its descriptor's own stats key.
      const limit = envoyLimitOf(override, '', undefined)
      return {
        kind: 'envoy',
        domain,
        ruleId: rule?.id ?? 'override',
        metricKey: overrideMetricKey(domain, descriptor.entries),
        rule: undefined,
        storeKey: storeKeyOf(domain, descriptor.entries),
        hits,
        cost: hits,
        limit,
        counter: this.#counterOf(limit),
        shadow: false,
        quota: this.#globalQuota,
        outcome: undefined,
      }
    }
    if (rule === undefined) return { kind: 'done', outcome: { kind: 'unmatched' } }
    if (rule.unlimited) {
      return {
        kind: 'done',
        outcome: rule.allowListed ? { kind: 'unlimited', ruleId: rule.id, allowListed: true } : { kind: 'unlimited', ruleId: rule.id },
      }
    }
    const quota = this.#globalQuota || rule.quota
    if (rule.envoyLimit !== undefined) {
      const limit = envoyLimitOf(rule.envoyLimit, rule.name ?? '', rule.envoyLimit)
      return {
        kind: 'envoy',
        domain,
        ruleId: rule.id,
        metricKey: rule.metricKey,
        rule,
        storeKey: rule.storeKey,
        hits,
        cost: hits,
        limit,
        counter: this.#counterOf(limit),
        shadow: rule.shadow,
        quota,
        outcome: undefined,
      }
    }
    let policies: readonly Policy[] = rule.policies
    let shadow = rule.shadow
    if (policies.every((policy) => policy.shadow)) {
      // A set of shadow policies alone would leave the limiter nothing to enforce: decide the
      // policies as enforced ones and apply shadow mode here, so they are decided and counted.
      policies = this.#unshadowedOf(policies)
      shadow = true
    }
    return {
      kind: 'policies',
      domain,
      ruleId: rule.id,
      metricKey: rule.metricKey,
      rule,
      storeKey: rule.storeKey,
      hits,
      policies,
      shadow,
      quota,
      outcome: undefined,
    }
  }

  /**
   * STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT, as upstream: read every upstream-style counter first;
   * if this request takes any of them over its limit, charge only those and leave the others as
   * they are (upstream reads with GET, then increments; the two steps are not one atomic call there either).
   */
  async #holdBackWithinLimit(plans: Plan[]): Promise<void> {
    const envoy = plans.filter((plan): plan is EnvoyPlan => plan.kind === 'envoy' && plan.hits > 0)
    if (envoy.length === 0) return
    const counts = await Promise.all(envoy.map((plan) => this.#count(plan, 0)))
    const goesOver = envoy.map((plan, i) => counts[i] + plan.hits > plan.limit.requestsPerUnit)
    if (!goesOver.includes(true)) return
    envoy.forEach((plan, i) => {
      if (!goesOver[i]) plan.cost = 0
    })
  }

  /** Asks the limiter for one descriptor's decision (charging it). */
  #ask(plan: EnvoyPlan | PoliciesPlan): Promise<Decision> {
    if (plan.kind === 'envoy') return this.#limiter.limit(plan.storeKey, { cost: plan.cost, policies: plan.counter })
    return this.#limiter.limit(plan.storeKey, { cost: plan.hits, policies: plan.policies })
  }

  /** The outcome of one descriptor from the limiter's decision (logged when it denies). */
  #outcome(plan: EnvoyPlan | PoliciesPlan, decision: Decision): DescriptorOutcome {
    const outcome = plan.kind === 'envoy' ? this.#envoyOutcome(plan, decision) : this.#policiesOutcome(plan, decision)
    plan.outcome = outcome
    return outcome
  }

  #policiesOutcome(plan: PoliciesPlan, decision: Decision): DescriptorOutcome {
    const policy = policyNamed(plan.policies, decision.policy)
    const wouldDeny = plan.shadow ? !decision.allowed || decision.shadow : decision.shadow
    const allowed = plan.shadow || decision.allowed
    const near = allowed && !wouldDeny && decision.limit - decision.remaining >= this.#nearLimitRatio * decision.limit
    const outcome: DescriptorOutcome = {
      kind: 'limited',
      ruleId: plan.ruleId,
      rule: plan.rule,
      allowed,
      wouldDeny,
      near,
      quota: plan.quota,
      policy,
      decision,
    }
    if (!allowed || wouldDeny) this.#logDenial(plan, decision, allowed)
    return outcome
  }

  #envoyOutcome(plan: EnvoyPlan, decision: Decision): DescriptorOutcome {
    const { requestsPerUnit } = plan.limit
    // Admitted only if charged: a counter that did not take the hits (a cost above its ceiling, or
    // above what is left of it: see COUNT_CEILING) says so by denying, and its count, unchanged,
    // must not read as "within the limit". Such a request is over, counted as upstream's INCRBY
    // would have left it, and no hit is stored. Whatever else denies (a failure mode's `closed`)
    // is over as well; only a decision the store charged is judged by its count.
    const charged = decision.allowed
    const count = charged ? countOf(decision) : countOf(decision) + plan.cost
    const over = !charged || count > requestsPerUnit
    const allowed = !over || plan.shadow
    const remaining = over ? 0 : requestsPerUnit - count
    // The answer as Floodgate's own clients (/v1/check, admin) read a Decision: the rule's limit,
    // not the counter's ceiling.
    // Hits above the rate itself can never pass, whatever the wait: said as `never` (counted all the
    // same, as upstream counts every hit), with no wait to suggest.
    const never = over && plan.hits > requestsPerUnit
    const retryAfterMs = over && !never ? decision.resetMs : 0
    const shadow = over && plan.shadow
    const reported = reportedDecision(decision, requestsPerUnit, !over, remaining, retryAfterMs, shadow, never)
    const nearThreshold = nearLimitThreshold(requestsPerUnit, this.#nearLimitRatio)
    const outcome: DescriptorOutcome = {
      kind: 'limited',
      ruleId: plan.ruleId,
      rule: plan.rule,
      allowed,
      wouldDeny: shadow,
      near: !over && count > nearThreshold,
      quota: plan.quota,
      policy: plan.counter[0],
      decision: reported,
      envoy: { unit: plan.limit.unit, requestsPerUnit: plan.limit.requestsPerUnit, name: plan.limit.name, count, over },
    }
    if (over) this.#logDenial(plan, reported, allowed)
    return outcome
  }

  // The store key holds the descriptor values (user ids, IP addresses): only its hash is logged,
  // enough to tell one key's denials from another's and to match a key one hashes by hand.
  #logDenial(plan: EnvoyPlan | PoliciesPlan, decision: Decision, shadowAllowed: boolean): void {
    if (this.#logger === undefined || !this.#logger.isLevelEnabled('debug')) return
    this.#logger.debug(
      {
        domain: plan.domain,
        rule: plan.ruleId,
        policy: decision.policy,
        key: keyHash(plan.storeKey),
        retryAfterMs: decision.retryAfterMs,
        source: decision.source,
        ...(shadowAllowed ? { shadow: true } : {}),
      },
      shadowAllowed ? 'rate limited (shadow mode: allowed)' : 'rate limited',
    )
  }

  /** Adds `cost` to the descriptor's upstream-style counter and reads the count after it. */
  async #count(plan: EnvoyPlan, cost: number): Promise<number> {
    return countOf(await this.#limiter.limit(plan.storeKey, { cost, policies: plan.counter }))
  }

  // One counter per descriptor and unit whatever the rate (the policy's name is the unit's), with
  // the rate as its nominal limit so the memory store keeps keys near their limit through a flood.
  // A rule's counter is kept with the rule's limit (no key to build per request); override rates
  // come from requests: that cache is bounded, oldest first out.
  #counterOf(limit: EnvoyPlan['limit']): readonly [Policy] {
    const known = limit.of === undefined ? undefined : this.#ruleCounters.get(limit.of)
    if (known !== undefined) return known
    const id = `${limit.unit}/${limit.requestsPerUnit}`
    let policies = this.#counters.get(id)
    if (policies === undefined) {
      const counter = createPolicy({
        name: envoyPolicyName(limit.unit),
        algorithm: 'fixed-window',
        limit: COUNT_CEILING,
        period: UNIT_MS[limit.unit],
      })
      policies = Object.freeze([Object.freeze({ ...counter, nominalLimit: limit.requestsPerUnit })] as [Policy])
      if (this.#counters.size >= MAX_COUNTER_POLICIES) this.#counters.delete(this.#counters.keys().next().value!)
      this.#counters.set(id, policies)
    }
    if (limit.of !== undefined) this.#ruleCounters.set(limit.of, policies)
    return policies
  }

  #unshadowedOf(policies: readonly Policy[]): readonly Policy[] {
    let copy = this.#unshadowed.get(policies)
    if (copy === undefined) {
      copy = Object.freeze(policies.map((policy) => Object.freeze({ ...policy, shadow: false })))
      this.#unshadowed.set(policies, copy)
    }
    return copy
  }

  /** As upstream: OVER_LIMIT when a non-quota descriptor is over, or every quota descriptor is; never under global shadow mode. */
  #overall(outcomes: readonly DescriptorOutcome[]): boolean {
    let deniedRate = 0
    let quotaTotal = 0
    let quotaDenied = 0
    for (const outcome of outcomes) {
      if (outcome.kind !== 'limited') continue
      if (outcome.quota) {
        quotaTotal++
        if (!outcome.allowed) quotaDenied++
      } else if (!outcome.allowed) {
        deniedRate++
      }
    }
    const allowed = deniedRate === 0 && (quotaTotal === 0 || quotaDenied < quotaTotal)
    if (!allowed && this.#globalShadow) {
      this.#metrics?.recordGlobalShadow()
      return true
    }
    return allowed
  }

  #record(plan: Plan): void {
    if ((this.#metrics === undefined && this.#observer === undefined) || plan.kind === 'done' || plan.outcome?.kind !== 'limited') return
    const outcome = plan.outcome
    const counts =
      plan.kind === 'envoy'
        ? upstreamCounts(plan.hits, plan.shadow, outcome.envoy as EnvoyStatus, this.#nearLimitRatio)
        : floodgateCounts(plan.hits, outcome)
    this.#metrics?.recordHit(plan.metricKey, counts)
    this.#observer?.(plan.metricKey, plan.storeKey, counts)
  }
}

/** A descriptor's work: decided already, an upstream-style counter, or Floodgate policies. */
type Plan = { kind: 'done'; outcome: DescriptorOutcome } | EnvoyPlan | PoliciesPlan

interface EnvoyPlan {
  kind: 'envoy'
  domain: string
  ruleId: string
  metricKey: string
  rule: MatchedRule | undefined
  storeKey: string
  /** The hits addend, as stats count it. */
  hits: number
  /** What is added to the counter (0 when STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT holds it back). */
  cost: number
  limit: EnvoyLimit
  /** The never-denying counter policy the limiter decides (see Decider.#counters). */
  counter: readonly [Policy]
  shadow: boolean
  quota: boolean
  outcome: DescriptorOutcome | undefined
}

interface PoliciesPlan {
  kind: 'policies'
  domain: string
  ruleId: string
  metricKey: string
  rule: MatchedRule
  storeKey: string
  hits: number
  policies: readonly Policy[]
  shadow: boolean
  quota: boolean
  outcome: DescriptorOutcome | undefined
}

/**
 * Tells a rule that `replaces` removed from a descriptor that no rule matches: only a request of
 * several descriptors can replace, and a descriptor matched alone then finds its rule again.
 */
function markReplaced(plans: Plan[], rules: readonly (MatchedRule | undefined)[], alone: (i: number) => MatchedRule | undefined): void {
  for (let i = 0; i < plans.length; i++) {
    const plan = plans[i]
    if (rules[i] !== undefined || plan.kind !== 'done' || plan.outcome.kind !== 'unmatched') continue
    const rule = alone(i)
    if (rule !== undefined) plans[i] = { kind: 'done', outcome: { kind: 'unmatched', replaced: rule.id } }
  }
}

/** The policy the decision names (the first one if none matches, as for a fail-open decision). */
function policyNamed(policies: readonly Policy[], name: string): Policy {
  for (let i = 0; i < policies.length; i++) if (policies[i].name === name) return policies[i]
  return policies[0]
}

/** `sha256:` and the first 16 hex digits of the key's SHA-256: `printf %s "$key" | sha256sum`. */
export function keyHash(storeKey: string): string {
  return `sha256:${createHash('sha256').update(storeKey).digest('hex').slice(0, 16)}`
}
