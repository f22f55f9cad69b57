// The records a lease key keeps beside its states: one ledger per policy, stored as a record of a policy of its own.

import type { Policy } from '../../core/policy.js'

// The memory store matches records by name and algorithm (as the Redis layout does by key), so the
// ledger's name must differ from the policy's; a user policy named `<name>#lease` of the same
// algorithm beside `<name>` would share it, which is why the suffix is unlikely text.
const LEDGER_SUFFIX = '#lease'

const ledgerPolicies = new WeakMap<Policy, Policy>()
const ledgers = new WeakSet<Policy>()
const withLedgerSets = new WeakMap<readonly Policy[], readonly Policy[]>()

/** The policy whose record holds `policy`'s lease ledger (made once per policy). */
export function ledgerPolicy(policy: Policy): Policy {
  let ledger = ledgerPolicies.get(policy)
  if (ledger === undefined) {
    ledger = Object.freeze({ ...policy, name: policy.name + LEDGER_SUFFIX })
    ledgerPolicies.set(policy, ledger)
    ledgers.add(ledger)
  }
  return ledger
}

/** Whether `policy` was made by ledgerPolicy (its record holds a ledger, not the algorithm's state). */
export function isLedgerPolicy(policy: Policy): boolean {
  return ledgers.has(policy)
}

/** `policies` followed by their ledger policies, the same array for the same set (the store's fast path keys on it). */
export function withLedgers(policies: readonly Policy[]): readonly Policy[] {
  let both = withLedgerSets.get(policies)
  if (both === undefined) {
    both = Object.freeze([...policies, ...policies.map(ledgerPolicy)])
    withLedgerSets.set(policies, both)
  }
  return both
}
