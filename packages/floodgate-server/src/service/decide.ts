// The one place a domain + descriptors + hits become per-descriptor decisions (rules → limiter); shared by HTTP and gRPC.

import { createHash } from 'node:crypto'
import { type Decision, FloodgateError, type Policy } from 'floodgate'
import { type MatchedRule, storeKeyOf } from 'floodgate/rules'
import { CounterPolicies, countOf, envoyLimitOf, overrideMetricKey, reportedDecision } from './envoy-counter.js'
import { type EnvoyPlan, markReplaced, type Plan, type PoliciesPlan } from './decide-plan.js'
import type {
  DecideInput,
  DecideOptions,
  DecideResult,
  DeciderOptions,
  DecisionLimiter,
  DescriptorInput,
  DescriptorOutcome,
  Entry,
  EnvoyStatus,
  RuleLookup,
} from './decide-types.js'

export type * from './decide-types.js'
import { floodgateCounts, nearLimitThreshold, upstreamCounts } from './hit-counts.js'
import type { ServiceMetrics } from './metrics.js'

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
  readonly #counters = new CounterPolicies()
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
    if (!knownDomain) this.#metrics?.recordDomainNotFound(domain, descriptors.length)
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
        counter: this.#counters.of(limit),
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
        counter: this.#counters.of(limit),
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

/** The policy the decision names (the first one if none matches, as for a fail-open decision). */
function policyNamed(policies: readonly Policy[], name: string): Policy {
  for (let i = 0; i < policies.length; i++) if (policies[i].name === name) return policies[i]
  return policies[0]
}

/** `sha256:` and the first 16 hex digits of the key's SHA-256: `printf %s "$key" | sha256sum`. */
export function keyHash(storeKey: string): string {
  return `sha256:${createHash('sha256').update(storeKey).digest('hex').slice(0, 16)}`
}
