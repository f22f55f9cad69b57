// Regions in `shared` mode against docs/regions.md's bound, on real redis-servers (one per region,
// on free ports) with the sync loop ticked by hand, so the replication lag λ is a number of rounds.

import { createPolicies, type AlgorithmName, type PolicyOptions } from '../../packages/floodgate/src/core/policy.js'
import { burst, startRegions, type TestRegions } from '../../packages/floodgate/test/regions/support.js'
import type { BoundRow } from './bounds.js'
import type { RunSize } from './setup.js'

const HOUR = 3_600_000

/**
 * One key in the first `active` regions: every round each decides `perRound` requests at once, then
 * every region ticks once; until a round admits nothing.
 */
async function run(net: TestRegions, active: number, perRound: number, algorithm: AlgorithmName, limit: number): Promise<BoundRow> {
  const key = `bound-${active}-${perRound}-${algorithm}`
  const policies = createPolicies([{ name: algorithm, algorithm, limit, period: '1h', regions: 'shared' }])
  const deciding = net.regions.slice(0, active)
  let admitted = 0
  for (let round = 0; round < 1_000; round++) {
    const counts = await Promise.all(deciding.map((region) => burst(region, key, perRound, policies)))
    const inRound = counts.reduce((a, b) => a + b, 0)
    admitted += inRound
    await net.tickAll()
    if (inRound === 0) break
  }
  // docs/regions.md: over-admission per window ≤ (R − 1)·ρ·λ, ρ a region's admissions per round, λ = 2 rounds.
  const bound = (active - 1) * perRound * 2
  return { setup: `R ${active}, ρ ${perRound}/round, ${algorithm}`, limit, admitted, over: admitted - limit, bound }
}

/** The setups the report tables: two and three regions deciding, two rates, a window and GCRA. */
export async function measureRegionsShared(size: RunSize): Promise<BoundRow[]> {
  const limit = size.quick ? 200 : 1_000
  // A window's start, plus a little: every run stays in one window of the hour-long limits.
  const now = Math.floor(Date.now() / HOUR) * HOUR + 1_000
  const policy: PolicyOptions = { name: 'unused', algorithm: 'fixed-window', limit, period: '1h', regions: 'shared' }
  const net = await startRegions(['ap', 'eu', 'us'], [policy], () => now, 1)
  try {
    const rows: BoundRow[] = []
    for (const [active, perRound, algorithm] of [
      [2, 10, 'fixed-window'],
      [2, 40, 'fixed-window'],
      [3, 20, 'fixed-window'],
      [2, 40, 'gcra'],
    ] as const) {
      rows.push(await run(net, active, perRound, algorithm, limit))
    }
    return rows
  } finally {
    await net.stop()
  }
}
