// The benchmark report's SVG charts (echarts, rendered server-side), shared by bench:report and
// bench:charts (which redraws them from the figures docs/benchmarks.md already states).

import * as echarts from 'echarts'
import { formatCount } from './support.js'

/** What a contender is: Floodgate's own, another library, or a floor (what no product beats; not a product). */
export type ContenderGroup = 'ours' | 'peer' | 'floor'

/**
 * Every contender's group, by the start of its name, as the benches name them. Explicit on purpose:
 * a contender whose name no line here covers makes `groupOf` throw, so a new one is classified when
 * it is added, never guessed (a name pattern once drew bare grpc-js as ours and lease rows as not).
 */
const GROUPS: readonly [prefix: string, group: ContenderGroup][] = [
  // bench:memory
  ['floodgate ', 'ours'],
  ['core only:', 'floor'],
  ['store only:', 'floor'],
  ['api floor:', 'floor'],
  ['floor:', 'floor'],
  ['sync floor:', 'floor'],
  ['bounded floor:', 'floor'],
  ['bounded sync floor:', 'floor'],
  ['rate-limiter-flexible', 'peer'],
  ['bare Map counter', 'floor'],
  // bench:redis (the sync modes are Floodgate's: write-back and lease rows)
  ['write-back ', 'ours'],
  ['lease ', 'ours'],
  ['rate-limit-redis', 'peer'],
  ['raw INCR', 'floor'],
  // bench:service (the bare servers answer a fixed message: floors for the HTTP and gRPC paths)
  ['bare Fastify route', 'floor'],
  ['POST /v1/check', 'ours'],
  ['gRPC ShouldRateLimit', 'ours'],
  ['grpc-js + proto-loader service path', 'ours'],
  ['bare grpc-js', 'floor'],
  ['bare Connect-ES', 'floor'],
]

/** The group of a contender; throws for a name GROUPS does not cover. */
export function groupOf(name: string): ContenderGroup {
  for (const [prefix, group] of GROUPS) if (name.startsWith(prefix)) return group
  throw new Error(`bench/charts.ts: contender ${JSON.stringify(name)} has no group; add its name to GROUPS`)
}

/** The legend's words and the bars' colours, per group. */
export const GROUP_STYLE: Record<ContenderGroup, { label: string; color: string }> = {
  ours: { label: 'Floodgate', color: '#3366cc' },
  peer: { label: 'other libraries', color: '#e8883a' },
  floor: { label: 'floors and bare servers (not products)', color: '#9aa0a6' },
}

/** One bar: a contender and its figure; `group` defaults to `groupOf(name)`. */
export interface Bar {
  name: string
  value: number
  group?: ContenderGroup
}

/** Renders an echarts option to an SVG document. */
export function svg(option: echarts.EChartsOption, width = 860, height = 380): string {
  const chart = echarts.init(null, null, { renderer: 'svg', ssr: true, width, height })
  chart.setOption({ animation: false, textStyle: { fontFamily: 'sans-serif' }, ...option })
  const out = chart.renderToSVGString()
  chart.dispose()
  return out
}

/**
 * Horizontal bars, one per contender, the largest on top, coloured by group with a legend. Each
 * group is a series of its own (empty where the row is another group's), stacked so every row
 * keeps one bar.
 */
export function barChart(title: string, unit: string, rows: readonly Bar[]): string {
  const sorted = [...rows].sort((a, b) => a.value - b.value)
  const groupOfRow = sorted.map((row) => row.group ?? groupOf(row.name))
  const shown = (['ours', 'peer', 'floor'] as const).filter((group) => groupOfRow.includes(group))
  return svg(
    {
      title: { text: title, left: 'center', textStyle: { fontSize: 14 } },
      legend: { bottom: 0, data: shown.map((group) => GROUP_STYLE[group].label) },
      grid: { top: 40, left: 330, right: 90, bottom: 62 },
      xAxis: { type: 'value', name: unit, nameLocation: 'middle', nameGap: 26 },
      yAxis: { type: 'category', data: sorted.map((row) => row.name), axisLabel: { fontSize: 11 } },
      series: shown.map((group) => ({
        name: GROUP_STYLE[group].label,
        type: 'bar' as const,
        stack: 'contenders',
        itemStyle: { color: GROUP_STYLE[group].color },
        data: sorted.map((row, i) => (groupOfRow[i] === group ? Math.round(row.value) : null)),
        label: {
          show: true,
          position: 'right' as const,
          fontSize: 10,
          formatter: (p: { value: unknown }) => (p.value == null ? '' : formatCount(Number(p.value))),
        },
      })),
    },
    860,
    Math.max(240, 95 + sorted.length * 30),
  )
}

/** One HTTP contender's latency percentiles (autocannon's keys: p50, p99_9, …), in ms. */
export interface LatencyRow {
  name: string
  percentiles: Record<string, number>
}

/** Latency against percentile, one line per HTTP contender, on a log scale, with a legend. */
export function latencyChart(latency: readonly LatencyRow[]): string {
  const keys = Object.keys(latency[0]?.percentiles ?? {}).filter((key) => key !== 'p0_001' && key !== 'p99_999')
  return svg({
    title: { text: 'HTTP latency under load, by percentile (autocannon)', left: 'center', textStyle: { fontSize: 14 } },
    legend: { bottom: 0 },
    grid: { top: 50, left: 70, right: 30, bottom: 75 },
    xAxis: { type: 'category', data: keys.map((key) => key.replace('_', '.')), name: 'percentile', nameLocation: 'middle', nameGap: 26 },
    yAxis: { type: 'log', name: 'ms', logBase: 10 },
    series: latency.map((contender) => ({
      name: contender.name,
      type: 'line' as const,
      symbolSize: 5,
      // autocannon reports whole milliseconds below 1 ms as 0: drawn at 0.1 so a log axis can show them.
      data: keys.map((key) => Math.max(0.1, contender.percentiles[key])),
    })),
  })
}

/** "100,000 and 1,000,000 keys": the key counts the heap figures were taken at. */
export function keyCounts(counts: readonly number[]): string {
  const words = counts.map((count) => formatCount(count))
  return `${words.length > 1 ? `${words.slice(0, -1).join(', ')} and ${words.at(-1)}` : (words[0] ?? '?')} keys`
}
