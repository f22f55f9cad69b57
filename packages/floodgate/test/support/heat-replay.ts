// Replays a trace of keys through AutoSync on an injected clock, with a stand-in for the lease engine
// and no store: what `auto` would lease at a given pace. auto-heat.test.ts holds its figures, and
// bench/auto.ts prints them (BENCH_AUTO_HEAT=1).

import type { Policy } from '../../src/core/policy.js'
import { AutoSync } from '../../src/limiter/sync/auto-sync.js'
import type { LeaseSync } from '../../src/limiter/sync/lease-sync.js'
import type { LeaseStore } from '../../src/stores/store.js'

export interface HeatReplay {
  /** The share of the second half's decisions made while their key was hot (the lease engine asked). */
  share: number
  /** Keys hot at the end. */
  hotKeys: number
  /** Keys that went back to exact a second in the second half (each a lease returned). */
  dropsPerSecond: number
}

/** Replays `decisions` of `keyOf` at `perSecond` decisions a second under `policies`, read over the second half. */
export function replayHeat(keyOf: (i: number) => string, policies: readonly Policy[], perSecond: number, decisions: number): HeatReplay {
  let now = 0
  let hot = 0
  let drops = 0
  const leases = {
    find: () => undefined,
    holding: () => ({ seed: () => {} }),
    tryLocal: () => void hot++,
    drop: () => void drops++,
  } as unknown as LeaseSync
  const auto = new AutoSync({ store: {} as LeaseStore, leases, clock: () => now })
  for (let i = 0; i < decisions; i++) {
    now = (i * 1000) / perSecond
    if (i === decisions / 2) hot = drops = 0
    auto.tryLocal(keyOf(i), policies, 1)
  }
  const seconds = decisions / 2 / perSecond
  return { share: hot / (decisions / 2), hotKeys: auto.heatTotals().hot, dropsPerSecond: drops / seconds }
}
