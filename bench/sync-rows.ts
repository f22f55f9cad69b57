// What the lease and write-back sections of `npm run bench:redis` share: their summary beside the
// exact mode and rate-limiter-flexible, and a fleet of instances saturating one hot key.

import { formatCount, median, printTable, ratio, runLoad } from './support.js'

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
