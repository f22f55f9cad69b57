// `npm run accuracy`: how exact each algorithm is. Replays seeded traffic traces through the core
// algorithms (the same code the memory store and, line for line, the Lua twins run) and measures
// what they admit against the exact rolling-window truth: no more than `limit` admitted in any
// window of `period`. Writes docs/accuracy.md and its SVG charts (echarts, rendered on the server).
//
//   npm run accuracy                      full traces (an hour each), into docs/
//   npm run accuracy -- --quick --out DIR  short traces, for CI's check that the report is produced
//
// The parts, in the order a run uses them: accuracy/setup.ts (limit, period, run size),
// traces.ts (the seeded traces), truth.ts (replay against the exact window), bounds.ts (write-back
// and shared regions against their documented bounds: write-back-bound.ts and write-back-under.ts on
// the memory store with simulated time, regions-bound.ts on redis-servers it starts on free ports), charts.ts (the SVGs)
// and report.ts (the text).

import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { BOUND_CHECKS } from './accuracy/bounds.js'
import { reportCharts } from './accuracy/charts.js'
import { reportMarkdown } from './accuracy/report.js'
import { ALGORITHMS, runSize } from './accuracy/setup.js'
import { traces } from './accuracy/traces.js'
import { replay, slidingWindowSweep } from './accuracy/truth.js'

const { values: flags } = parseArgs({
  options: { quick: { type: 'boolean', default: false }, out: { type: 'string', default: 'docs' } },
})

async function main(): Promise<void> {
  const size = runSize(flags.quick)
  const out = flags.out
  const charts = join(out, 'accuracy')
  mkdirSync(charts, { recursive: true })
  const all = traces(size)
  const outcomes = all.flatMap((trace) => ALGORITHMS.map((algorithm) => replay(algorithm, trace)))
  const sweep = slidingWindowSweep(size)
  const bounds = []
  for (const check of BOUND_CHECKS) bounds.push({ check, rows: await check.measure(size) })
  const files = reportCharts(size, all, outcomes, sweep, bounds)
  for (const [name, content] of Object.entries(files)) writeFileSync(join(charts, name), content)
  writeFileSync(join(out, 'accuracy.md'), reportMarkdown({ size, out, charts, all, outcomes, sweep, bounds }))
  console.log(`wrote ${join(out, 'accuracy.md')} and ${Object.keys(files).length} charts in ${charts}`)
}

await main()
