// What the lease and write-back sections of `npm run bench:redis` share: their summary beside the
// exact mode and rate-limiter-flexible, their rows under the bench's load, and a fleet of instances
// saturating one hot key.

import { formatCount, median, printTable, ratio, runLoad, type Contender } from './support.js'
import type { WriteBackBenchContext } from './write-back.js'

/** The load before each measured round of a 10k-key row, outside the measurement (keys in use). */
export const WARM_MS = 1000

/**
 * A row of a sync mode: `decide` under the bench's load over `keyOf`'s keys, after WARM_MS of it when
 * `warm`. The round ends once `settle` has handed the store what the instance holds (a flush, leases
 * given back), so that work is in this row's time and Redis CPU, not the next contender's.
 */
export function syncContender(
  context: WriteBackBenchContext,
  name: string,
  keyOf: (i: number) => string,
  decide: (key: string) => Promise<boolean>,
  settle: () => Promise<void>,
  warm: boolean,
): Contender {
  const load = (durationMs: number) =>
    runLoad({
      callers: context.callers,
      durationMs,
      maxOps: context.maxOpsPerRound,
      op: context.counted(
        name,
        (i) => decide(keyOf(i)),
        (allowed) => !allowed,
      ),
    })
  return {
    name,
    before: warm ? () => load(WARM_MS).then(() => undefined) : undefined,
    async measure() {
      const started = performance.now()
      const result = await load(context.roundMs)
      await settle()
      return (result.ops * 1000) / (performance.now() - started)
    },
  }
}

/** One contender's samples, as the main bench's interleaved rounds give them. */
export interface SyncResult {
  name: string
  median: number
  samples: number[]
}

/** The `mode`'s rows (`rowNames`) beside the exact mode and rate-limiter-flexible, from the same run. */
export function printSyncSummary(
  mode: string,
  rowNames: readonly string[],
  results: readonly SyncResult[],
  redisCpu: (name: string) => number[],
  exactName: string,
  rlfName: string,
): void {
  const exact = results.find((r) => r.name === exactName)!.median
  const rlf = results.find((r) => r.name === rlfName)!.median
  const rows = results
    .filter((r) => rowNames.includes(r.name) || r.name === exactName || r.name === rlfName)
    .map((r) => {
      const cpu = redisCpu(r.name)
      const perDecision = median(cpu.map((busy, i) => busy / r.samples[i])) * 1e6
      return [r.name, formatCount(r.median), ratio(r.median, rlf), ratio(r.median, exact), perDecision.toFixed(3)]
    })
  printTable(
    ['contender', 'median decisions/s', 'vs rlf', 'vs exact', 'redis µs/decision'],
    rows,
    `${mode} beside the exact mode (targets: ≥ 10x rate-limiter-flexible, ≥ 5x exact, ≤ 0.2 µs of Redis CPU per decision)`,
  )
}

/**
 * 64 callers per instance of `fleet` deciding `key` for `durationMs`; `onAdmitted` hears each
 * admission as it happens. Returns how many decisions were made and how many admitted.
 */
export async function hammerHotKey(
  fleet: readonly ((key: string) => Promise<boolean>)[],
  key: string,
  durationMs: number,
  onAdmitted: () => void = () => {},
): Promise<{ decisions: number; admitted: number }> {
  let decisions = 0
  let admitted = 0
  await Promise.all(
    fleet.map((decide) =>
      runLoad({
        callers: 64,
        durationMs,
        maxOps: Number.MAX_SAFE_INTEGER,
        op: async () => {
          decisions++
          if (await decide(key)) {
            admitted++
            onAdmitted()
          }
        },
      }),
    ),
  )
  return { decisions, admitted }
}
