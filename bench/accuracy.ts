// `npm run accuracy`: how exact each algorithm is. Replays seeded traffic traces through the core
// algorithms (the same code the memory store and, line for line, the Lua twins run) and measures
// what they admit against the exact rolling-window truth: no more than `limit` admitted in any
// window of `period`. Writes docs/accuracy.md and its SVG charts (echarts, rendered on the server).
//
//   npm run accuracy                      full traces (an hour each), into docs/
//   npm run accuracy -- --quick --out DIR  short traces, for CI's check that the report is produced

import { mkdirSync, writeFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { parseArgs } from 'node:util'
import * as echarts from 'echarts'
import { evaluateKey, type PolicyRecord } from '../packages/floodgate/src/core/evaluate.js'
import { createPolicy, type AlgorithmName, type Policy } from '../packages/floodgate/src/core/policy.js'

const { values: flags } = parseArgs({
  options: { quick: { type: 'boolean', default: false }, out: { type: 'string', default: 'docs' } },
})
const QUICK = flags.quick
const OUT = flags.out
const CHARTS = join(OUT, 'accuracy')

const LIMIT = 100
const PERIOD_MS = 60_000
const DURATION_MS = QUICK ? 10 * 60_000 : 60 * 60_000
const ALGORITHMS: AlgorithmName[] = ['fixed-window', 'sliding-window', 'sliding-log', 'token-bucket', 'leaky-bucket', 'gcra']

/** One request of a trace: when, and which client sent it. */
interface Arrival {
  readonly at: number
  readonly client: number
}

interface Trace {
  readonly name: string
  readonly about: string
  readonly clients: number
  readonly arrivals: Arrival[]
  /** Clients that send faster than the limit (the crowd's few); the others stay below it. */
  readonly overLimit?: ReadonlySet<number>
}

// Mulberry32: a small seeded generator, so every run (and CI) replays the same traces.
function random(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** Poisson arrivals for one client at `ratePerMs(t)` (thinning against `peakPerMs`). */
function poisson(next: () => number, client: number, peakPerMs: number, ratePerMs: (t: number) => number): Arrival[] {
  const out: Arrival[] = []
  for (let t = -Math.log(1 - next()) / peakPerMs; t < DURATION_MS; t += -Math.log(1 - next()) / peakPerMs) {
    if (next() * peakPerMs < ratePerMs(t)) out.push({ at: Math.floor(t), client })
  }
  return out
}

/** Quiet at half the limit's rate, with a burst at 6x for 5-30 s every one to four minutes; `seed` picks the bursts. */
function burstyArrivals(seed: number): Arrival[] {
  const rate = LIMIT / PERIOD_MS
  const next = random(seed)
  const bursts: [number, number][] = []
  for (let t = 20_000; t < DURATION_MS; t += 60_000 + next() * 180_000) bursts.push([t, t + 5_000 + next() * 25_000])
  const inBurst = (t: number) => bursts.some(([from, to]) => t >= from && t < to)
  return poisson(next, 0, 6 * rate, (t) => (inBurst(t) ? 6 * rate : 0.5 * rate))
}

/** Seeds of the bursty traces the sliding-window sweep replays (the single bursty trace above is seed 2). */
const SWEEP_SEEDS = Array.from({ length: QUICK ? 6 : 40 }, (_, i) => 100 + i)

/**
 * Over-admission of modes whose documented bound is not "never over the limit": write-back sync
 * (issue 12: at most the deltas of one flush interval per instance) and regions in `shared` mode
 * (issue 13: at most what other regions admitted before their usage was heard). When they land,
 * each adds an entry that replays its mode on the traces and states its bound's formula; the
 * report then tables measured over-admission against the bound. Empty until then.
 */
interface BoundCheck {
  readonly mode: string
  /** The documented bound, as a formula a reader can check. */
  readonly bound: string
  /** Replays the mode; the most admitted in any rolling window, and the bound evaluated for the same setup. */
  readonly measure: () => { worstWindow: number; boundValue: number }
}
const BOUND_CHECKS: readonly BoundCheck[] = []

function traces(): Trace[] {
  const rate = LIMIT / PERIOD_MS
  const steadyNext = random(1)
  const steady = poisson(steadyNext, 0, 1.2 * rate, () => 1.2 * rate)

  const bursty = burstyArrivals(2)

  // A client that knows the window: the limit just before each minute ends and again just after.
  const edge: Arrival[] = []
  for (let window = PERIOD_MS; window < DURATION_MS; window += PERIOD_MS) {
    for (let i = 0; i < LIMIT; i++) edge.push({ at: window - 1_000 + i * 10, client: 0 })
    for (let i = 0; i < LIMIT; i++) edge.push({ at: window + i * 10, client: 0 })
  }

  // Many clients, most far below the limit and a few above it: the shape of a public API's traffic.
  const crowdNext = random(3)
  const crowd: Arrival[] = []
  const overLimit = new Set<number>()
  const clients = QUICK ? 200 : 1_000
  for (let client = 0; client < clients; client++) {
    const share = crowdNext() < 0.02 ? 1.5 + crowdNext() * 3 : crowdNext() * 0.3
    if (share > 1) overLimit.add(client)
    crowd.push(...poisson(crowdNext, client, share * rate, () => share * rate))
  }
  crowd.sort((a, b) => a.at - b.at)

  return [
    { name: 'steady', about: 'one client, Poisson arrivals at 1.2x the limit', clients: 1, arrivals: steady },
    { name: 'bursty', about: 'one client, 0.5x the limit with bursts at 6x for 5-30 s every 1-4 min', clients: 1, arrivals: bursty },
    {
      name: 'window edge',
      about: 'one client sending the limit just before and just after each minute boundary',
      clients: 1,
      arrivals: edge,
    },
    { name: 'crowd', about: `${clients} clients: 98% at 0-0.3x the limit, 2% at 1.5-4.5x`, clients, arrivals: crowd, overLimit },
  ]
}

interface Outcome {
  readonly algorithm: AlgorithmName
  readonly trace: string
  readonly requests: number
  readonly admitted: number
  /** Requests this algorithm decided otherwise than the exact rolling window would have, given what it had admitted. */
  readonly wronglyAllowed: number
  readonly wronglyDenied: number
  /** Of those, the ones that fell on requests of clients sending below the limit. */
  readonly wrongBelowLimit: number
  /** The most admitted in any one window of PERIOD_MS, by any client. */
  readonly worstWindow: number
  /** Per client, the admitted timestamps (for the window chart). */
  readonly admittedAt: number[][]
}

function policyOf(algorithm: AlgorithmName): Policy {
  return createPolicy({ algorithm, limit: LIMIT, period: PERIOD_MS })
}

function replay(algorithm: AlgorithmName, trace: Trace): Outcome {
  const policy = policyOf(algorithm)
  const records: (PolicyRecord | undefined)[] = new Array(trace.clients)
  const admittedAt: number[][] = Array.from({ length: trace.clients }, () => [])
  // Per client, the index of the oldest admission still inside the rolling window.
  const windowStart = new Array<number>(trace.clients).fill(0)
  let admitted = 0
  let wronglyAllowed = 0
  let wronglyDenied = 0
  let wrongBelowLimit = 0
  let worstWindow = 0
  for (const { at, client } of trace.arrivals) {
    const mine = admittedAt[client]
    while (windowStart[client] < mine.length && mine[windowStart[client]] <= at - PERIOD_MS) windowStart[client]++
    const inWindow = mine.length - windowStart[client]
    const exactAllows = inWindow + 1 <= LIMIT
    const evaluation = evaluateKey([records[client]], at, 1, [policy])
    if (evaluation.allowed) {
      records[client] = evaluation.records[0]
      mine.push(at)
      admitted++
      worstWindow = Math.max(worstWindow, inWindow + 1)
      if (!exactAllows) wronglyAllowed++
    } else if (exactAllows) {
      wronglyDenied++
    } else {
      continue
    }
    if (exactAllows !== evaluation.allowed && trace.overLimit !== undefined && !trace.overLimit.has(client)) wrongBelowLimit++
  }
  return {
    algorithm,
    trace: trace.name,
    requests: trace.arrivals.length,
    admitted,
    wronglyAllowed,
    wronglyDenied,
    wrongBelowLimit,
    worstWindow,
    admittedAt,
  }
}

/** Rolling-window counts of one client's admissions, sampled every `stepMs` over [from, to). */
function rollingCounts(admittedAt: readonly number[], from: number, to: number, stepMs: number): [number, number][] {
  const points: [number, number][] = []
  let start = 0
  let end = 0
  for (let t = from; t < to; t += stepMs) {
    while (end < admittedAt.length && admittedAt[end] <= t) end++
    while (start < end && admittedAt[start] <= t - PERIOD_MS) start++
    points.push([(t - from) / 1000, end - start])
  }
  return points
}

function svg(option: echarts.EChartsOption, width = 860, height = 380): string {
  const chart = echarts.init(null, null, { renderer: 'svg', ssr: true, width, height })
  chart.setOption({ animation: false, textStyle: { fontFamily: 'sans-serif' }, ...option })
  const out = chart.renderToSVGString()
  chart.dispose()
  return out
}

function barChart(title: string, yName: string, outcomes: Outcome[], value: (o: Outcome) => number, traceNames: string[]): string {
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

function round(value: number, digits: number): number {
  const scale = 10 ** digits
  return Math.round(value * scale) / scale
}

function percent(part: number, whole: number, digits = 2): string {
  return `${((100 * part) / whole).toFixed(digits)}%`
}

function main(): void {
  mkdirSync(CHARTS, { recursive: true })
  const all = traces()
  const outcomes = all.flatMap((trace) => ALGORITHMS.map((algorithm) => replay(algorithm, trace)))
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
  const span = Math.min(DURATION_MS, 15 * 60_000)
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
  // The sliding-window counter on many hour-long bursty traces: how far its error spreads.
  const sweep = SWEEP_SEEDS.map((seed) => {
    const trace: Trace = { name: `bursty-${seed}`, about: '', clients: 1, arrivals: burstyArrivals(seed) }
    const [sliding, truth] = [replay('sliding-window', trace), replay('sliding-log', trace)]
    return {
      seed,
      over: (sliding.admitted - truth.admitted) / truth.admitted,
      worst: sliding.worstWindow / LIMIT,
      wrong: (sliding.wronglyAllowed + sliding.wronglyDenied) / sliding.requests,
    }
  }).sort((a, b) => a.worst - b.worst)
  files['sliding-window-bursty.svg'] = svg({
    title: {
      text: `Sliding-window counter on ${sweep.length} bursty ${DURATION_MS / 60_000}-minute traces, sorted by worst window`,
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
  for (const [name, content] of Object.entries(files)) writeFileSync(join(CHARTS, name), content)
  const spread = (values: number[], digits: number) => `${Math.min(...values).toFixed(digits)}–${Math.max(...values).toFixed(digits)}`
  const medianOf = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1]

  const rows = outcomes.map((o) => {
    const truth = exact(o.trace).admitted
    return `| ${o.trace} | ${o.algorithm} | ${o.requests} | ${o.admitted} | ${o.admitted >= truth ? '+' : ''}${percent(o.admitted - truth, truth)} | ${(o.worstWindow / LIMIT).toFixed(2)}x | ${percent(o.wronglyAllowed, o.requests, 3)} | ${percent(o.wronglyDenied, o.requests, 3)} |`
  })
  const chart = (name: string, alt: string) => `![${alt}](${relative(OUT, join(CHARTS, name))})`
  const crowd = (algorithm: AlgorithmName) => outcomes.find((o) => o.trace === 'crowd' && o.algorithm === algorithm)!
  const slidingCrowd = crowd('sliding-window')
  const crowdTrace = all.find((trace) => trace.name === 'crowd')!
  const fromOverLimit = crowdTrace.arrivals.filter((arrival) => crowdTrace.overLimit!.has(arrival.client)).length
  const slidingBursty = bursty.find((o) => o.algorithm === 'sliding-window')!
  const report = `# Accuracy

How exactly each algorithm enforces "${LIMIT} requests per ${PERIOD_MS / 1000} s" against the exact
truth: **no more than ${LIMIT} admitted in any rolling ${PERIOD_MS / 1000}-second window**. Produced by
\`npm run accuracy\`${QUICK ? ' (quick: 10-minute traces)' : ''} from seeded traces, so every run gives the same
figures; the algorithms are the core's, which the memory store runs and the Redis scripts mirror
line for line (the equivalence test proves the twins identical).

- **admitted vs exact**: admissions relative to the sliding log, which is the exact rolling window.
- **worst window**: the most admitted in any one rolling window, as a multiple of the limit.
- **wrongly allowed / denied**: requests the algorithm decided otherwise than the exact rolling
  window would have, given what the algorithm itself had admitted so far (Cloudflare's measure).

Traces (${DURATION_MS / 60_000} minutes each):

${all.map((trace) => `- **${trace.name}**: ${trace.about} (${trace.arrivals.length} requests).`).join('\n')}

| trace | algorithm | requests | admitted | vs exact | worst window | wrongly allowed | wrongly denied |
|---|---|---|---|---|---|---|---|
${rows.join('\n')}

${chart('admitted-vs-exact.svg', 'Admitted relative to the exact rolling window')}

${chart('worst-window.svg', 'Worst rolling window as a multiple of the limit')}

${chart('wrong-decisions.svg', 'Share of requests decided otherwise than the exact rolling window')}

${chart('bursty-window.svg', 'Rolling-window admissions over time on the bursty trace')}

## The sliding-window counter on bursty traffic

One trace is one draw. The same bursty shape (half the limit's rate, bursts at 6x for 5–30 s every
1–4 minutes), replayed for ${DURATION_MS / 60_000} minutes with ${sweep.length} seeds, through the sliding-window counter and the
exact log:

| | median | range |
|---|---|---|
| admitted overall vs exact | ${(100 * medianOf(sweep.map((r) => r.over))).toFixed(2)}% | ${spread(
    sweep.map((r) => 100 * r.over),
    2,
  )}% |
| worst rolling window, over the limit | +${(100 * (medianOf(sweep.map((r) => r.worst)) - 1)).toFixed(0)}% | ${spread(
    sweep.map((r) => 100 * (r.worst - 1)),
    0,
  )}% |
| requests decided otherwise than the exact window | ${(100 * medianOf(sweep.map((r) => r.wrong))).toFixed(1)}% | ${spread(
    sweep.map((r) => 100 * r.wrong),
    1,
  )}% |

${chart('sliding-window-bursty.svg', 'Sliding-window counter: over-admission and worst window per bursty trace')}

Issue 15 quotes +2.8% overall and a worst window 55–78% over the limit, measured earlier on traces
that are not in the repository; the table above is what \`npm run accuracy\` reproduces from seeds.

Overall it stays within a few percent of the exact window, because its errors go both ways: it
over-admits after a quiet window (the estimate spreads the previous window's few requests evenly,
so a burst late in the previous window is discounted while it is still inside the rolling window)
and under-admits after a busy one. The worst rolling window is another matter: when a burst lands
at the end of a window that was quiet before it, the next window's estimate discounts that burst
while it is still inside the rolling window: here up to ${(100 * (Math.max(...sweep.map((r) => r.worst)) - 1)).toFixed(0)}% over the limit within one
period. That is the figure to look at if the limit protects something that breaks above it.

## Write-back and regions against their bounds

Write-back sync (issue 12) and regions in \`shared\` mode (issue 13) admit over the limit by design,
within a documented bound. They are not in the repository yet; when they land, each adds an entry to
\`BOUND_CHECKS\` in \`bench/accuracy.ts\` (its replay and its bound's formula) and this section tables
the measured worst window against the bound.${BOUND_CHECKS.length === 0 ? ' No mode is registered yet.' : ''}
${
  BOUND_CHECKS.length === 0
    ? ''
    : `\n| mode | bound | worst window | bound for this setup |\n|---|---|---|---|\n${BOUND_CHECKS.map((check) => {
        const { worstWindow, boundValue } = check.measure()
        return `| ${check.mode} | ${check.bound} | ${worstWindow} | ${boundValue} |`
      }).join('\n')}\n`
}
## Reading it

- **sliding-log** is the truth by construction: it keeps every admitted timestamp, so it never
  admits more than the limit in any window and never denies a request the window had room for.
  It costs memory per admitted request (up to \`limit\` timestamps per key).
- **fixed-window** counts per clock-aligned window, so a client that knows the boundary gets up to
  twice the limit in the minute around it (the window-edge trace: ${(outcomes.find((o) => o.trace === 'window edge' && o.algorithm === 'fixed-window')!.worstWindow / LIMIT).toFixed(2)}x). It is envoyproxy/ratelimit's
  algorithm, exact per window and the cheapest.
- **sliding-window** (the weighted two-window counter) approximates the rolling window in O(1):
  it assumes the previous window's requests were spread evenly. On bursty traffic that assumption
  fails both ways: here it admitted ${percent(slidingBursty.admitted - exact('bursty').admitted, exact('bursty').admitted)} against the
  exact log, its worst window held ${(slidingBursty.worstWindow / LIMIT).toFixed(2)}x the limit, and it decided
  ${percent(slidingBursty.wronglyAllowed + slidingBursty.wronglyDenied, slidingBursty.requests, 2)} of requests otherwise than the exact window.
- **token-bucket, gcra and leaky-bucket** enforce a different contract, \`burst + rate x t\` over any
  interval t, which is smoother but not a rolling-window cap: a full bucket followed by its refill
  admits up to twice the limit within one period. Judge them by their own contract, which they
  meet exactly; they appear here so the choice between the two contracts is visible.

### Against Cloudflare's 0.003%

Cloudflare's post on its rate limiter ([Counting things, a lot of different things](https://blog.cloudflare.com/counting-things-a-lot-of-different-things/),
June 2017) reports that its sliding-window counter decided 0.003% of requests wrongly (allowed when
over the threshold, or limited when under it), on 400 million requests from 270,000 distinct
sources. (The figure is often repeated as 0.0003%; the post says 0.003%.) That figure is a property
of the traffic as much as of the algorithm. A client below its limit is decided right by every algorithm here: on the crowd trace,
${crowdTrace.clients - crowdTrace.overLimit!.size} of ${crowdTrace.clients} clients stay below the limit and the sliding window decided
${slidingCrowd.wrongBelowLimit} of their requests wrongly. Every wrong decision fell on the ${crowdTrace.overLimit!.size} clients above
it, which sent ${percent(fromOverLimit, crowdTrace.arrivals.length, 1)} of the requests: ${percent(slidingCrowd.wronglyAllowed + slidingCrowd.wronglyDenied, fromOverLimit, 1)} of their requests, ${percent(slidingCrowd.wronglyAllowed + slidingCrowd.wronglyDenied, slidingCrowd.requests, 2)} of all.
Most of those are denials the exact window would have allowed (${percent(slidingCrowd.wronglyDenied, slidingCrowd.requests, 2)} of all requests),
so a client at its limit gets a little less than the limit, not more. Cloudflare's 0.003% says that
requests of clients at their limit were a tiny share of its traffic; where they are a large share,
expect the error per request of a client at its limit (here ${percent(slidingBursty.wronglyAllowed + slidingBursty.wronglyDenied, slidingBursty.requests, 1)} on the bursty trace).

### When to choose the sliding window

Choose it when the limit guards capacity in aggregate (an API tier, a tenant's quota) and its O(1)
state matters more than per-window exactness: its error is small when clients sit below their
limit and averages out across many clients. Choose the sliding log when a limit is a promise to
someone (a paid quota, a login-attempt cap) and its keys are few or its limits small; choose
gcra or token-bucket when you want smooth pacing with a stated burst; choose fixed-window when
you need envoyproxy/ratelimit's semantics or the cheapest counter.
`
  writeFileSync(join(OUT, 'accuracy.md'), report)
  console.log(`wrote ${join(OUT, 'accuracy.md')} and ${Object.keys(files).length} charts in ${CHARTS}`)
}

main()
