// Where a MemoryStore reads a key's records to, kept and reused across requests.

import type { PolicyRecord } from '../../core/evaluate.js'

/** Where `read` puts what it reads, one of each per request policy: a store keeps one and reuses it. */
export interface Scratch {
  into: (PolicyRecord | undefined)[]
  records: PolicyRecord[]
  states: number[][]
}

/** A scratch for requests of up to `count` policies (grown on demand). */
export function sizeScratch(scratch: Scratch, count: number): void {
  while (scratch.records.length < count) {
    scratch.records.push({ blockedUntil: 0, state: undefined })
    scratch.states.push([])
  }
  if (scratch.into.length !== count) scratch.into.length = count
}
