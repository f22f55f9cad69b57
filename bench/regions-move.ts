// bench:regions' split hand-over rows: demand that moves from one region to another mid-window, under
// real timers across 50 ms links (test/regions/demand-move.ts runs each case), and how long after the
// move the regions together first admitted 90% of the limit. Target (issue 27): within 15 sync
// intervals, in every case, and never over the limit.

import { caseName, MoveBed, type MoveCase } from '../packages/floodgate/test/regions/demand-move.js'
import { formatCount, printTable } from './support.js'

const TARGET_INTERVALS = 15

/** Runs the 8 cases (2 and 3 regions, deny cache off and on, burst and steady) `rounds` times each and prints one row per case. */
export async function demandMoves(rounds: number): Promise<void> {
  const bed = await MoveBed.start()
  const rows: string[][] = []
  try {
    for (const regions of [2, 3] as const) {
      for (const denyCache of [false, true]) {
        for (const shape of ['burst', 'steady'] as const) {
          const c: MoveCase = { regions, denyCache, shape }
          const runs = []
          for (let i = 0; i < rounds; i++) runs.push(await bed.run(c))
          const intervals = runs.map((r) => (r.reachedMs === undefined ? Infinity : r.reachedMs / r.intervalMs))
          const worst = Math.max(...intervals)
          const over = Math.max(...runs.map((r) => r.admitted - r.limit))
          rows.push([
            caseName(c),
            runs.map((r) => formatCount(r.before)).join(' / '),
            runs.map((r) => (r.reachedMs === undefined ? 'never' : `${r.reachedMs.toFixed(0)} ms`)).join(' / '),
            runs.map((_, i) => (Number.isFinite(intervals[i]) ? intervals[i].toFixed(1) : 'never')).join(' / '),
            runs.map((r) => String(r.reachedTicks ?? '—')).join(' / '),
            runs.map((r) => formatCount(r.admitted)).join(' / '),
            over > 0 ? `OVER by ${over}` : worst <= TARGET_INTERVALS ? 'yes' : 'no',
          ])
        }
      }
    }
  } finally {
    await bed.stop()
  }
  printTable(
    [
      'case',
      'admitted before',
      'to 90% of the limit',
      'intervals',
      'receiver ticks',
      'admitted in all',
      `≤ ${TARGET_INTERVALS} intervals, ≤ limit`,
    ],
    rows,
    'Split: demand moves from us to ap 1 s into a fresh 10-minute window (limit 1000, sync every 100 ms, 50 ms each way); ' +
      `time from the move until 90% of the limit is admitted across regions (${rounds} runs per case). ` +
      'burst: 1500 at once in us, then 150 every 100 ms in ap; steady: 600/s in us, then in ap',
  )
}
