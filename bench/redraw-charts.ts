// `npm run bench:charts`: redraws the report's SVG charts from the figures docs/benchmarks.md states,
// without running a benchmark (after a change to the charts' code, say).
//
//   npm run bench:charts               docs/benchmarks.md → docs/benchmarks/*.svg
//   npm run bench:charts -- --out DIR  DIR/benchmarks.md → DIR/benchmarks/*.svg

import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { figuresOfReport, reportCharts } from './report-charts.js'

const { values } = parseArgs({ options: { out: { type: 'string', default: 'docs' } } })
const out = values.out ?? 'docs'
const charts = reportCharts(figuresOfReport(readFileSync(join(out, 'benchmarks.md'), 'utf8')))
mkdirSync(join(out, 'benchmarks'), { recursive: true })
for (const [name, text] of Object.entries(charts)) writeFileSync(join(out, 'benchmarks', name), text)
console.log(`wrote ${Object.keys(charts).length} charts in ${join(out, 'benchmarks')}`)
