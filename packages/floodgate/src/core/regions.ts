// The per-policy `regions` option: how one limit is shared between regions, and which algorithms allow it.

import type { AlgorithmName, Mode } from './policy.js'

/**
 * How a policy's limit is shared between regions (data centers) that each keep their own store
 * (see docs/regions.md):
 * - `shared`: every region admits against the whole limit minus what it has heard the others
 *   admitted; over-admission is bounded by the others' rate × the replication lag.
 * - `split`: every region holds an allotment of the limit and enforces it exactly; allotments
 *   move to where the demand is and never sum above the limit (zero over-admission).
 */
export type RegionMode = 'shared' | 'split'

export const REGION_MODES: readonly RegionMode[] = ['shared', 'split']

/** Why `regions: mode` is unsound for a policy, or undefined when it is sound. */
export function regionRefusal(mode: RegionMode, algorithm: AlgorithmName, policyMode: Mode, sync: string): string | undefined {
  if (algorithm === 'sliding-log') {
    return (
      'sliding-log keeps one timestamp per request; usage heard later from another region has no timestamps to merge. ' +
      'Use sliding-window'
    )
  }
  if (algorithm === 'leaky-bucket') {
    return 'a leaky bucket orders requests by their arrival at one store, which regions apart cannot share. Use token-bucket'
  }
  if (algorithm === 'concurrency') {
    return 'concurrency counts requests in flight, and a release in another region is not a unit consumed. Keep it per region'
  }
  if (mode === 'split' && (algorithm === 'token-bucket' || algorithm === 'gcra')) {
    return 'split hands out units of a window, and a bucket has no window to hold them in. Use shared, or fixed-window/sliding-window'
  }
  if (policyMode === 'elastic') return 'elastic mode asks a shared pool at each admission past the limit, which regions apart do not share'
  if (mode === 'split' && sync === 'write-back') {
    // Split's one promise is zero over-admission: a region enforces its allotment exactly, so the
    // allotments' sum bounds the total. Write-back admits from copies that lag the region's store
    // by a flush (docs/sync.md: up to N·c + r·(flushMs + 2·RTT) over what the store allows), and a
    // request it denies never reaches the store, so the demand that moves allotments goes unseen.
    return (
      'split promises zero over-admission, and write-back admits from copies a flush behind the allotment ' +
      "(and hides denied demand from the rebalancing). Use sync: 'lease' or 'auto' with split (exact), or shared with write-back"
    )
  }
  return undefined
}
