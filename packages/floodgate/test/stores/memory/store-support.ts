// What the MemoryStore tests share: a fixed-window policy, and one charge read back as its response.

import type { MemoryStore } from '../../../src/stores/memory/memory-store.js'
import { createPolicy, type Policy, type PolicyOptions } from '../../../src/core/policy.js'
import type { Duration } from '../../../src/core/duration.js'

export const T0 = 1_700_000_000_000

export function fixed(limit: number, period: Duration = '1s', extra: Partial<PolicyOptions> = {}): Policy {
  return createPolicy({ algorithm: 'fixed-window', limit, period, ...extra })
}

export async function charge(store: MemoryStore, key: string, policies: readonly Policy[], cost: number, now: number) {
  const [response] = await store.evaluate([{ key, policies, cost, now }])
  return response
}
