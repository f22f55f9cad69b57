// Names a policy set by content, so callers that build a fresh array per call still share one lease.

import type { Policy } from '../../core/policy.js'

const byArray = new WeakMap<readonly Policy[], string>()

/**
 * A short text equal for equal policy sets (name, algorithm and every number that decides): a
 * lease taken for one array serves the next array of the same policies. Cached per array.
 */
export function policySetId(policies: readonly Policy[]): string {
  let id = byArray.get(policies)
  if (id === undefined) {
    id = policies
      .map((p) => `${p.name}\u0001${p.algorithm}\u0001${p.limit}\u0001${p.periodMs}\u0001${p.burst}\u0001${p.leaseMs}\u0001${p.leaseMax}`)
      .join('\u0002')
    byArray.set(policies, id)
  }
  return id
}
