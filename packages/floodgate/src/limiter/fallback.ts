// What decides when the store cannot: fail open (allow, up to a local ceiling per key), fail closed
// (deny until the breaker's next probe), or a local in-memory store with each limit divided among
// the instances.

import type { Policy } from '../core/policy.js'
import { MemoryStore } from '../stores/memory/memory-store.js'
import { toFallbackDecision } from './decisions.js'
import type { Backend, GuardedStore, StoreAnswer } from './guarded-store.js'
import type { PolicyPlan, Tier } from './policy-plan.js'
import type { Decision, DecisionSource, OnStoreError } from './types.js'

/**
 * The local fallback store (onStoreError 'local'), made on first use. It runs each plan's local
 * tier and answers synchronously, so a local decision takes the same steps as a store's. It also
 * keeps the ceiling of onStoreError 'open' (see `ceiling`): one bounded MemoryStore for both.
 */
export class LocalBackend implements Backend {
  readonly source: DecisionSource = 'fallback-local'
  private store: MemoryStore | undefined
  // Each plan's ceiling policies (see ceilingPolicies), made on first use.
  private readonly ceilings = new WeakMap<PolicyPlan, readonly Policy[]>()

  constructor(private readonly clock: () => number) {}

  tier(plan: PolicyPlan): Tier {
    return plan.local
  }

  call(key: string, policies: readonly Policy[], cost: number): StoreAnswer {
    this.store ??= new MemoryStore({ clock: this.clock })
    return this.store.evaluateSync({ key, policies, cost })
  }

  /**
   * Charges `cost` to `key`'s ceiling under onStoreError 'open' (a negative cost gives it back):
   * true while the key stays within its local share of every enforced rate limit this window.
   * So "open" while the store fails means "up to the limit per instance", never "unlimited": a
   * store that is only slow, or one dead for long, lets each instance admit at most its share of
   * each window (a fixed window of the policy's period, whatever its algorithm: open is meant to
   * be generous, and needs no shaping). Also the denial's wait, in `retryAfterMs`.
   */
  ceiling(plan: PolicyPlan, key: string, cost: number): { allowed: boolean; retryAfterMs: number } {
    let policies = this.ceilings.get(plan)
    if (policies === undefined) {
      policies = ceilingPolicies(plan)
      this.ceilings.set(plan, policies)
    }
    if (policies.length === 0 || cost === 0) return OPEN
    this.store ??= new MemoryStore({ clock: this.clock })
    const response = this.store.evaluateSync({ key, policies, cost })
    if (response.allowed) return OPEN
    let retryAfterMs = 0
    for (const result of response.results) if (!result.allowed && result.retryAfterMs > retryAfterMs) retryAfterMs = result.retryAfterMs
    return { allowed: false, retryAfterMs }
  }

  /** Forgets `key` here too: units charged locally while the store was away must not outlive a reset. */
  async reset(key: string, policies: readonly Policy[], plan?: PolicyPlan): Promise<void> {
    await this.store?.reset(key, policies)
    const ceiling = plan === undefined ? undefined : this.ceilings.get(plan)
    if (ceiling !== undefined && ceiling.length > 0) await this.store?.reset(key, ceiling)
  }

  async close(): Promise<void> {
    await this.store?.close()
  }
}

const OPEN = Object.freeze({ allowed: true, retryAfterMs: 0 })

/**
 * The decision of fail-open or fail-closed; 'local' is decided on the LocalBackend instead. Open
 * admits up to the key's ceiling (LocalBackend.ceiling), and past it denies until the window ends,
 * still as 'fallback-open': the store did not decide it.
 */
export function failedDecision(
  mode: Exclude<OnStoreError, 'local'>,
  plan: PolicyPlan,
  remote: GuardedStore,
  local: LocalBackend,
  key: string,
  cost: number,
): Decision {
  if (mode === 'open') {
    const ceiling = local.ceiling(plan, key, cost)
    return toFallbackDecision(plan, ceiling.allowed, ceiling.retryAfterMs, 'fallback-open')
  }
  return toFallbackDecision(plan, false, remote.closedWaitMs(key), 'fallback-closed')
}

/**
 * The ceiling of open: each enforced rate policy of the plan's local tier (its limit divided among
 * `instances`) as a fixed window of its period, under a name of its own, so that it never meets
 * the state of onStoreError 'local'. Shadow policies never deny; concurrency has no window, and
 * fail-open holds no slot to free, so neither has a ceiling.
 */
function ceilingPolicies(plan: PolicyPlan): readonly Policy[] {
  const policies: Policy[] = []
  for (const i of plan.enforcedIndex) {
    const policy = plan.local.policies[i]
    if (policy.algorithm === 'concurrency') continue
    policies.push(
      Object.freeze({ ...policy, name: `open-ceiling:${policy.name}`, algorithm: 'fixed-window', blockMs: 0, mode: 'hard', shadow: false }),
    )
  }
  return policies
}
