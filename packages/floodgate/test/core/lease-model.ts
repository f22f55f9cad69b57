// The lease reference: core/lease.ts over records kept as a store keeps them (dropped lazily at their expiry).

import { leaseKey, type LeaseAsk, type Ledger } from '../../src/core/lease.js'
import type { PolicyRecord } from '../../src/core/evaluate.js'
import type { Policy } from '../../src/core/policy.js'

/** Records kept as a store keeps them: dropped at their expiry (lazily, as both stores do). */
export class LeaseModelStore {
  private readonly kept = new Map<string, { record: PolicyRecord; expiresAt: number }>()

  lease(key: string, policies: readonly Policy[], ask: LeaseAsk, now: number) {
    const read = (id: string) => {
      const entry = this.kept.get(id)
      return entry !== undefined && now < entry.expiresAt ? entry.record : undefined
    }
    const ids = policies.map((policy) => `${key}:${policy.name}`)
    const records = ids.map(read)
    const ledgers = ids.map((id) => read(`${id}#l`)?.state as Ledger | undefined)
    const evaluation = leaseKey(records, ledgers, now, ask, policies)
    const all = [...ids, ...ids.map((id) => `${id}#l`)]
    all.forEach((id, i) => this.kept.set(id, { record: evaluation.records[i], expiresAt: now + evaluation.ttlMs[i] }))
    return evaluation
  }
}
