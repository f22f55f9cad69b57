// The benchmark charts: every contender in an explicit group (ours, another library, a floor), bars
// coloured by it with a legend, no NaN in a title, and the committed SVGs exactly what the figures
// in docs/benchmarks.md draw (so a change of the chart code comes with its redrawn charts).

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { GROUP_STYLE, barChart, groupOf, keyCounts } from '../../bench/charts.js'
import { figuresOfReport, reportCharts } from '../../bench/report-charts.js'

const DOCS = join(import.meta.dirname, '../../docs')
// Drawn once: echarts numbers the style classes of an SVG across the renders of a process, so only
// the first drawing of the set matches what bench:charts writes.
const CHARTS = reportCharts(figuresOfReport(readFileSync(join(DOCS, 'benchmarks.md'), 'utf8')))

/** Text of an SVG's <text> elements (echarts writes labels as text, XML-escaped). */
function textOf(svg: string): string[] {
  const unescape = (text: string) => text.replaceAll('&amp;', '&').replaceAll('&lt;', '<').replaceAll('&gt;', '>')
  return [...svg.matchAll(/<text[^>]*>([^<]*)<\/text>/g)].map((m) => unescape(m[1]))
}

const fills = (svg: string, color: string) => svg.split(`fill="${color}"`).length - 1

describe('benchmark charts', () => {
  it('groups each contender explicitly: bare servers are floors, lease and write-back rows are ours', () => {
    assert.equal(groupOf('bare grpc-js + proto-loader'), 'floor')
    assert.equal(groupOf('bare Connect-ES (connect-node)'), 'floor')
    assert.equal(groupOf('lease gcra, 1 hot key'), 'ours')
    assert.equal(groupOf('write-back gcra, 10k keys'), 'ours')
    assert.equal(groupOf('gRPC ShouldRateLimit, Redis'), 'ours')
    assert.equal(groupOf('POST /v1/check, embedded store'), 'ours')
    assert.equal(groupOf('rate-limit-redis (express-rate-limit)'), 'peer')
    assert.equal(groupOf('floor: node:http2, fixed gRPC frame'), 'floor')
    assert.throws(() => groupOf('a new contender'), /has no group; add its name to GROUPS/)
  })

  it('colours each bar by its group and names the groups in a legend', () => {
    const svg = barChart('t', 'decisions/s', [
      { name: 'floodgate gcra', value: 3 },
      { name: 'lease gcra, 10k keys', value: 5 },
      { name: 'bare grpc-js + proto-loader', value: 2 },
      { name: 'rate-limiter-flexible', value: 1 },
    ])
    // One fill per bar, and one for the group's legend icon.
    assert.equal(fills(svg, GROUP_STYLE.ours.color), 2 + 1)
    assert.equal(fills(svg, GROUP_STYLE.floor.color), 1 + 1)
    assert.equal(fills(svg, GROUP_STYLE.peer.color), 1 + 1)
    const text = textOf(svg)
    for (const group of Object.values(GROUP_STYLE)) assert.ok(text.includes(group.label), group.label)
  })

  it('titles the heap chart with the key counts, not NaN', () => {
    assert.equal(keyCounts([100_000, 1_000_000]), '100,000 and 1,000,000 keys')
    assert.equal(keyCounts([2_000]), '2,000 keys')
    const charts = CHARTS
    assert.ok(
      textOf(charts['memory-per-key.svg']).includes('Embedded store: heap bytes per key (at 100,000 and 1,000,000 keys, one policy)'),
    )
    for (const [name, svg] of Object.entries(charts)) assert.ok(!textOf(svg).some((t) => t.includes('NaN')), name)
  })

  it('has every bar chart with a legend, and the committed SVGs redrawn from the figures docs/benchmarks.md states', () => {
    const charts = CHARTS
    assert.equal(Object.keys(charts).length, 6)
    for (const [name, svg] of Object.entries(charts)) {
      if (name !== 'latency.svg') assert.ok(textOf(svg).includes(GROUP_STYLE.ours.label), `${name} has a legend`)
      assert.equal(readFileSync(join(DOCS, 'benchmarks', name), 'utf8'), svg, `docs/benchmarks/${name}: run npm run bench:charts`)
    }
  })
})
