// What decides when the store cannot: fail open (allow), fail closed (deny until the breaker's next
// probe), or a local in-memory store with each limit divided among the instances.

import type { Policy } from '../core/policy.js'
import { MemoryStore } from '../stores/memory/memory-store.js'
import { toFallbackDecision } from './decisions.js'
import type { Backend, GuardedStore, StoreAnswer } from './guarded-store.js'
import type { PolicyPlan, Tier } from './policy-plan.js'
import type { Decision, DecisionSource, OnStoreError } from './types.js'

/**
 * The local fallback store (onStoreError 'local'), made on first use. It runs each plan's local
 * tier and answers synchronously, so a local decision takes the same steps as a store's.
 */
export class LocalBackend implements Backend {
  readonly source: DecisionSource = 'fallback-local'
  private store: MemoryStore | undefined

  constructor(private readonly clock: () => number) {}

  tier(plan: PolicyPlan): Tier {
    return plan.local
  }

  call(key: string, policies: readonly Policy[], cost: number): StoreAnswer {
    this.store ??= new MemoryStore({ clock: this.clock })
    return this.store.evaluateSync({ key, policies, cost })
  }

  /** Forgets `key` here too: units charged locally while the store was away must not outlive a reset. */
  async reset(key: string, policies: readonly Policy[]): Promise<void> {
    await this.store?.reset(key, policies)
  }

  async close(): Promise<void> {
    await this.store?.close()
  }
}

/** The decision of fail-open or fail-closed; 'local' is decided on the LocalBackend instead. */
export function failedDecision(mode: Exclude<OnStoreError, 'local'>, plan: PolicyPlan, remote: GuardedStore): Decision {
  if (mode === 'open') return toFallbackDecision(plan, true, 0, 'fallback-open')
  return toFallbackDecision(plan, false, remote.closedWaitMs(), 'fallback-closed')
}
