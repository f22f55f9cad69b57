// Concurrency leases: what an admitted request holds in its concurrency policies, and where to give it back.

import { FloodgateError } from '../core/errors.js'
import type { Policy } from '../core/policy.js'
import type { Backend } from './guarded-store.js'
import type { PolicyPlan } from './policy-plan.js'
import type { Decision, Lease } from './types.js'

/** What release() needs to hand a lease back where it was taken. */
export interface LeaseOrigin {
  readonly plan: PolicyPlan
  readonly backend: Backend
  /** The concurrency policies holding a slot, as the backend runs them. */
  readonly policies: readonly Policy[]
  released: boolean
}

/** The leases this limiter handed out, each with its origin (held weakly: a dropped lease expires by itself). */
export class Leases {
  private readonly origins = new WeakMap<Lease, LeaseOrigin>()

  /** Attaches a lease to an admitted decision of a plan with concurrency policies. */
  attach(key: string, cost: number, plan: PolicyPlan, backend: Backend, decision: Decision, acquiredAt: number): void {
    const tier = backend.tier(plan)
    const policies: Policy[] = []
    for (let i = 0; i < plan.policies.length; i++) {
      const policy = plan.policies[i]
      // After a shadow denial only the enforced policies were charged, so only they hold a slot.
      if (policy.algorithm === 'concurrency' && !(decision.shadow && policy.shadow)) policies.push(tier.policies[i])
    }
    if (policies.length === 0) return
    const lease: Lease = Object.freeze({ key, cost, policies: Object.freeze(policies.map((policy) => policy.name)), acquiredAt })
    this.origins.set(lease, { plan, backend, policies, released: false })
    decision.lease = lease
  }

  /**
   * Where `lease` was taken. A lease this limiter did not hand out (e.g. one that crossed a process
   * boundary) is resolved by name against the limiter's own plan, on the store; under `sync: 'lease'`
   * or `'auto'` it frees nothing (no policies): its slot may belong to a block another instance took,
   * which the store ends at the block's own time, and a refund then would take someone else's slot.
   * Such a slot comes free when its block ends or its period passes.
   */
  originOf(lease: Lease, ownPlan: PolicyPlan | undefined, remote: Backend): LeaseOrigin {
    const origin = this.origins.get(lease)
    if (origin !== undefined) return origin
    const plan = ownPlan
    if (plan === undefined) {
      throw new FloodgateError(
        'INVALID_REQUEST',
        'lease: not issued by this limiter, and the limiter has no policies of its own to resolve it',
      )
    }
    const policies = lease.policies.map((name) => {
      const at = plan.policies.findIndex((policy) => policy.name === name && policy.algorithm === 'concurrency')
      if (at < 0) {
        throw new FloodgateError('INVALID_REQUEST', `lease.policies: no concurrency policy named ${JSON.stringify(name)} in this limiter`)
      }
      return plan.remote.policies[at]
    })
    const leased = policies.some((policy) => policy.sync === 'lease' || policy.sync === 'auto')
    return { plan, backend: remote, policies: leased ? [] : policies, released: false }
  }
}
