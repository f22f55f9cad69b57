// The `lease` and `auto` sync modes as the limiter sees them: a Backend answering from held leases
// in-process, and through the guarded store (timeout, breaker) when a store call is needed.

import type { Policy } from '../../core/policy.js'
import type { EvaluateResponse } from '../../stores/store.js'
import type { Backend, GuardedStore, Starter, StoreAnswer } from '../guarded-store.js'
import type { PolicyPlan, Tier } from '../policy-plan.js'
import type { DecisionSource, Lease } from '../types.js'
import type { AutoSync } from './auto-sync.js'
import type { LeaseSync } from './lease-sync.js'

/** A response that says which path decided it (`lease`: in-process; else the backend's source). */
export interface SourcedResponse extends EvaluateResponse {
  source: DecisionSource
}

/** The engine of one mode: LeaseSync for `lease`, AutoSync for `auto`. */
type Engine = Pick<LeaseSync | AutoSync, 'tryLocal' | 'enqueue'>

/**
 * Decides on a lease engine (for `auto`, a cold key's decision may be the plain exact call instead:
 * see AutoSync.plainExact). A decision the held lease covers is answered synchronously, with no
 * store call, timeout or breaker: held leases keep serving through an outage. Otherwise the engine's
 * store call goes through `GuardedStore.callVia`, so it is bounded by the limiter's timeout (which
 * abandons it: the caller's units then stay in the lease) and counted by its breaker, and it carries
 * the decision's deadline, so a store that gets it later grants and charges nothing.
 */
export class LeaseBackend implements Backend {
  readonly source: DecisionSource = 'store'

  constructor(
    private readonly remote: GuardedStore,
    private readonly engine: Engine,
    private readonly leases: LeaseSync,
    // `auto`'s engine, whose cold keys of some algorithms are decided by the plain exact call.
    private readonly auto?: AutoSync,
  ) {}

  tier(plan: PolicyPlan): Tier {
    return plan.remote
  }

  call(key: string, policies: readonly Policy[], cost: number): StoreAnswer {
    const local = this.engine.tryLocal(key, policies, cost) as SourcedResponse | undefined
    if (local !== undefined) {
      local.source = 'lease'
      return local
    }
    // A cold `auto` key costs what `sync: 'always'` costs: the same call, script and batching.
    if (this.auto?.plainExact(key, policies) === true) return this.remote.call(key, policies, cost)
    return this.remote.callVia(key, policies, cost, this.start)
  }

  /** Frees a concurrency lease's slots in the held lease it came from (see LeaseSync.release). */
  release(lease: Lease, plan: PolicyPlan): void {
    this.leases.release(lease.key, plan.remote.policies, lease.cost, lease.acquiredAt ?? -Infinity)
  }

  /** Drops the held lease of `key` without returning it (its key is being reset). */
  forget(key: string, policies: readonly Policy[]): void {
    this.leases.forget(key, policies)
  }

  private readonly start: Starter = (request, done) =>
    this.engine.enqueue(
      request.key,
      request.policies,
      request.cost,
      (error, response, source) => {
        if (response !== undefined) (response as SourcedResponse).source = source === 'lease' ? 'lease' : 'store'
        done(error, response)
      },
      request.deadline,
    )
}
