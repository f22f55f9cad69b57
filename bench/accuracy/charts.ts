// SVG charts, rendered on the server by echarts.

import * as echarts from 'echarts'
import type { BoundCheck, BoundRow } from './bounds.js'
import { ALGORITHMS, LIMIT, PERIOD_MS, type RunSize } from './setup.js'
import type { Trace } from './traces.js'
import { rollingCounts, type Outcome, type SweepRow } from './truth.js'

/** The report's charts, by file name: algorithms against the exact window, and the sliding-window sweep. */
export function reportCharts(
  size: RunSize,
  all: readonly Trace[],
  outcomes: Outcome[],
  sweep: readonly SweepRow[],
  bounds: readonly { check: BoundCheck; rows: readonly BoundRow[] }[],
): Record<string, string> {
  const exact = (trace: string) => outcomes.find((o) => o.trace === trace && o.algorithm === 'sliding-log')!
  const names = all.map((trace) => trace.name)
  const files: Record<string, string> = {
    'admitted-vs-exact.svg': barChart(
      'Admitted, relative to the exact rolling window (sliding log), %',
      '%',
      outcomes,
      (o) => (100 * (o.admitted - exact(o.trace).admitted)) / exact(o.trace).admitted,
      names,
    ),
    'worst-window.svg': barChart(
      `Most admitted in any ${PERIOD_MS / 1000} s window, as a multiple of the limit`,
      'x limit',
      outcomes,
      (o) => o.worstWindow / LIMIT,
      names,
    ),
    'wrong-decisions.svg': barChart(
      'Requests decided otherwise than the exact rolling window would, %',
      '%',
      outcomes,
      (o) => (100 * (o.wronglyAllowed + o.wronglyDenied)) / o.requests,
      names,
    ),
  }
  const bursty = outcomes.filter((o) => o.trace === 'bursty')
  const span = Math.min(size.durationMs, 15 * 60_000)
  files['bursty-window.svg'] = svg(
    {
      title: {
        text: `Bursty trace: admitted in the last ${PERIOD_MS / 1000} s, first ${span / 60_000} minutes`,
        left: 'center',
        textStyle: { fontSize: 14 },
      },
      legend: { top: 30 },
      grid: { top: 80, left: 60, right: 20, bottom: 40 },
      xAxis: { type: 'value', name: 's', max: span / 1000 },
      yAxis: { type: 'value', name: 'admitted' },
      series: [
        ...(['fixed-window', 'sliding-window', 'sliding-log', 'gcra'] as const).map((algorithm) => ({
          name: algorithm,
          type: 'line' as const,
          showSymbol: false,
          data: rollingCounts(bursty.find((o) => o.algorithm === algorithm)!.admittedAt[0], 0, span, 1_000),
        })),
        {
          name: 'limit',
          type: 'line' as const,
          showSymbol: false,
          lineStyle: { type: 'dashed' as const },
          data: [
            [0, LIMIT],
            [span / 1000, LIMIT],
          ],
        },
      ],
    },
    860,
    420,
  )
  files['sliding-window-bursty.svg'] = svg({
    title: {
      text: `Sliding-window counter on ${sweep.length} bursty ${size.durationMs / 60_000}-minute traces, sorted by worst window`,
      left: 'center',
      textStyle: { fontSize: 14 },
    },
    legend: { top: 30 },
    grid: { top: 80, left: 60, right: 20, bottom: 40 },
    xAxis: { type: 'category', name: 'trace', data: sweep.map((r) => String(r.seed)), axisLabel: { show: false } },
    yAxis: { type: 'value', name: '%' },
    series: [
      { name: 'worst rolling window, % over the limit', type: 'bar' as const, data: sweep.map((r) => round(100 * (r.worst - 1), 1)) },
      { name: 'admitted overall vs exact, %', type: 'bar' as const, data: sweep.map((r) => round(100 * r.over, 2)) },
    ],
  })
  const rows = bounds.flatMap(({ check, rows }) => rows.map((row) => ({ name: `${check.mode.replace(/`/g, '')}: ${row.setup}`, row })))
  files['bounds.svg'] = svg(
    {
      title: {
        text: 'Over-admission (under: shortfall) in one window against the documented bound',
        left: 'center',
        textStyle: { fontSize: 14 },
      },
      legend: { top: 30 },
      grid: { top: 70, left: 250, right: 30, bottom: 40 },
      yAxis: { type: 'category', data: rows.map((r) => r.name), inverse: true },
      xAxis: { type: 'value', name: 'units over (under: short of) the limit' },
      series: [
        { name: 'measured', type: 'bar' as const, data: rows.map((r) => r.row.over) },
        { name: 'bound', type: 'bar' as const, data: rows.map((r) => r.row.bound) },
      ],
    },
    860,
    120 + 36 * rows.length,
  )
  return files
}

export function svg(option: echarts.EChartsOption, width = 860, height = 380): string {
  const chart = echarts.init(null, null, { renderer: 'svg', ssr: true, width, height })
  chart.setOption({ animation: false, textStyle: { fontFamily: 'sans-serif' }, ...option })
  const out = chart.renderToSVGString()
  chart.dispose()
  return out
}

/** One bar per algorithm and trace. */
export function barChart(title: string, yName: string, outcomes: Outcome[], value: (o: Outcome) => number, traceNames: string[]): string {
  return svg({
    title: { text: title, left: 'center', textStyle: { fontSize: 14 } },
    legend: { top: 30 },
    grid: { top: 80, left: 70, right: 20, bottom: 40 },
    xAxis: { type: 'category', data: ALGORITHMS },
    yAxis: { type: 'value', name: yName },
    series: traceNames.map((trace) => ({
      name: trace,
      type: 'bar' as const,
      data: ALGORITHMS.map((algorithm) => round(value(outcomes.find((o) => o.algorithm === algorithm && o.trace === trace)!), 3)),
    })),
  })
}

export function round(value: number, digits: number): number {
  const scale = 10 ** digits
  return Math.round(value * scale) / scale
}

export function percent(part: number, whole: number, digits = 2): string {
  return `${((100 * part) / whole).toFixed(digits)}%`
}
