// The report's text, docs/accuracy.md: its tables, its charts' links, and what they mean.

import { relative, join } from 'node:path'
import type { AlgorithmName } from '../../packages/floodgate/src/core/policy.js'
import type { BoundCheck, BoundRow } from './bounds.js'
import { percent } from './charts.js'
import { LIMIT, PERIOD_MS, type RunSize } from './setup.js'
import type { Trace } from './traces.js'
import type { Outcome, SweepRow } from './truth.js'

export interface ReportInput {
  readonly size: RunSize
  /** Where the report is written, and its charts' folder (links are relative to the report). */
  readonly out: string
  readonly charts: string
  readonly all: readonly Trace[]
  readonly outcomes: readonly Outcome[]
  readonly sweep: readonly SweepRow[]
  /** Each bound check with the rows it measured. */
  readonly bounds: readonly { readonly check: BoundCheck; readonly rows: readonly BoundRow[] }[]
}

export function reportMarkdown(input: ReportInput): string {
  const { size, out: OUT, charts: CHARTS, all, outcomes, sweep, bounds } = input
  const exact = (trace: string) => outcomes.find((o) => o.trace === trace && o.algorithm === 'sliding-log')!
  const bursty = outcomes.filter((o) => o.trace === 'bursty')
  const spread = (values: number[], digits: number) => `${Math.min(...values).toFixed(digits)}–${Math.max(...values).toFixed(digits)}`
  const medianOf = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1]

  const rows = outcomes.map((o) => {
    const truth = exact(o.trace).admitted
    const cells = [
      o.trace,
      o.algorithm,
      o.requests,
      o.admitted,
      `${o.admitted >= truth ? '+' : ''}${percent(o.admitted - truth, truth)}`,
      `${(o.worstWindow / LIMIT).toFixed(2)}x`,
      percent(o.wronglyAllowed, o.requests, 3),
      percent(o.wronglyDenied, o.requests, 3),
    ]
    return `| ${cells.join(' | ')} |`
  })
  const chart = (name: string, alt: string) => `![${alt}](${relative(OUT, join(CHARTS, name))})`
  const crowd = (algorithm: AlgorithmName) => outcomes.find((o) => o.trace === 'crowd' && o.algorithm === algorithm)!
  const slidingCrowd = crowd('sliding-window')
  const crowdTrace = all.find((trace) => trace.name === 'crowd')!
  const fromOverLimit = crowdTrace.arrivals.filter((arrival) => crowdTrace.overLimit!.has(arrival.client)).length
  const slidingBursty = bursty.find((o) => o.algorithm === 'sliding-window')!
  const worstOfSweep = (100 * (Math.max(...sweep.map((r) => r.worst)) - 1)).toFixed(0)
  const windowEdge = outcomes.find((o) => o.trace === 'window edge' && o.algorithm === 'fixed-window')!
  const burstyWrong = slidingBursty.wronglyAllowed + slidingBursty.wronglyDenied
  const crowdWrong = slidingCrowd.wronglyAllowed + slidingCrowd.wronglyDenied
  return `# Accuracy

How exactly each algorithm enforces "${LIMIT} requests per ${PERIOD_MS / 1000} s" against the exact
truth: **no more than ${LIMIT} admitted in any rolling ${PERIOD_MS / 1000}-second window**. Produced by
\`npm run accuracy\`${size.quick ? ' (quick: 10-minute traces)' : ''} from seeded traces, so every run gives the same
figures; the algorithms are the core's, which the memory store runs and the Redis scripts mirror
line for line (the equivalence test proves the twins identical).

- **admitted vs exact**: admissions relative to the sliding log, which is the exact rolling window.
- **worst window**: the most admitted in any one rolling window, as a multiple of the limit.
- **wrongly allowed / denied**: requests the algorithm decided otherwise than the exact rolling
  window would have, given what the algorithm itself had admitted so far (Cloudflare's measure).

Traces (${size.durationMs / 60_000} minutes each):

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
1–4 minutes), replayed for ${size.durationMs / 60_000} minutes with ${sweep.length} seeds, through the sliding-window counter and the
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
while it is still inside the rolling window: here up to ${worstOfSweep}% over the limit within one
period. That is the figure to look at if the limit protects something that breaks above it.

## Write-back and regions against their bounds

Write-back sync and regions in \`shared\` mode admit over the limit by design, within a documented
bound; write-back's share rule also leaves part of the limit unused when instances use a key one
after another, within a documented shortfall. Each setup below runs the mode through the RateLimiter
and counts what one window of the limit admitted; the bound is the documented formula with the
setup's terms (\`BOUND_CHECKS\` in \`bench/accuracy/bounds.ts\`).

${bounds.map(boundSection).join('\n')}
${chart('bounds.svg', 'Over- and under-admission of write-back and regions against their documented bounds')}

${bounds
  .map(
    ({ check, rows }) =>
      `- **${check.mode}**: ${
        rows.every((row) => row.over <= row.bound) ? 'within its bound in every setup' : '**over its bound in some setup**'
      }, at ${spread(
        rows.map((row) => (100 * row.over) / row.bound),
        0,
      )}% of it.`,
  )
  .join('\n')}

The bounds are worst cases. Write-back's assumes every instance decides from a copy as stale as a
flush interval and two round trips allow, at the full rate; the share rule (an instance spends at
most its share of what its copy shows remaining) holds the instances back as the limit nears, so a
run spends only part of that. Shared regions reach at most half of theirs in these runs: λ is two
rounds at most, but what a region has not heard when it admits the last units is the others' last
round only, one round's worth; and a round that lands exactly on the limit leaves nothing over.
Write-back's under-admission floor counts only the answers an instance is sure to get: one burst
decided in one turn gets exactly one share per instance, so its shortfall is the formula's,
\`L·(1 − 1/N)^N\`; demand spread over time gets a share per early refresh and per tick besides, and
falls short by a few units only.

## Reading it

- **sliding-log** is the truth by construction: it keeps every admitted timestamp, so it never
  admits more than the limit in any window and never denies a request the window had room for.
  It costs memory per admitted request (up to \`limit\` timestamps per key).
- **fixed-window** counts per clock-aligned window, so a client that knows the boundary gets up to
  twice the limit in the minute around it (the window-edge trace: ${(windowEdge.worstWindow / LIMIT).toFixed(2)}x).
  It is envoyproxy/ratelimit's algorithm, exact per window and the cheapest.
- **sliding-window** (the weighted two-window counter) approximates the rolling window in O(1):
  it assumes the previous window's requests were spread evenly. On bursty traffic that assumption
  fails both ways: here it admitted ${percent(slidingBursty.admitted - exact('bursty').admitted, exact('bursty').admitted)} against the
  exact log, its worst window held ${(slidingBursty.worstWindow / LIMIT).toFixed(2)}x the limit, and it decided
  ${percent(burstyWrong, slidingBursty.requests, 2)} of requests otherwise than the exact window.
- **token-bucket, gcra and leaky-bucket** enforce a different contract, \`burst + rate x t\` over any
  interval t, which is smoother but not a rolling-window cap: a full bucket followed by its refill
  admits up to twice the limit within one period. Judge them by their own contract, which they
  meet exactly; they appear here so the choice between the two contracts is visible.

### Against Cloudflare's 0.003%

Cloudflare's post on its rate limiter
([Counting things, a lot of different things](https://blog.cloudflare.com/counting-things-a-lot-of-different-things/),
June 2017) reports that its sliding-window counter decided 0.003% of requests wrongly (allowed when
over the threshold, or limited when under it), on 400 million requests from 270,000 distinct
sources. (The figure is often repeated as 0.0003%; the post says 0.003%.) That figure is a property
of the traffic as much as of the algorithm. A client below its limit is decided right by every
algorithm here: on the crowd trace,
${crowdTrace.clients - crowdTrace.overLimit!.size} of ${crowdTrace.clients} clients stay below the limit and the sliding window decided
${slidingCrowd.wrongBelowLimit} of their requests wrongly. Every wrong decision fell on the ${crowdTrace.overLimit!.size} clients above
it, which sent ${percent(fromOverLimit, crowdTrace.arrivals.length, 1)} of the requests: ${percent(crowdWrong, fromOverLimit, 1)} of their
requests, ${percent(crowdWrong, slidingCrowd.requests, 2)} of all. Most of those are denials the exact window would
have allowed (${percent(slidingCrowd.wronglyDenied, slidingCrowd.requests, 2)} of all requests),
so a client at its limit gets a little less than the limit, not more. Cloudflare's 0.003% says that
requests of clients at their limit were a tiny share of its traffic; where they are a large share,
expect the error per request of a client at its limit (here ${percent(burstyWrong, slidingBursty.requests, 1)} on the
bursty trace).

### When to choose the sliding window

Choose it when the limit guards capacity in aggregate (an API tier, a tenant's quota) and its O(1)
state matters more than per-window exactness: its error is small when clients sit below their
limit and averages out across many clients. Choose the sliding log when a limit is a promise to
someone (a paid quota, a login-attempt cap) and its keys are few or its limits small; choose
gcra or token-bucket when you want smooth pacing with a stated burst; choose fixed-window when
you need envoyproxy/ratelimit's semantics or the cheapest counter.
`
}

function boundSection({ check, rows }: { check: BoundCheck; rows: readonly BoundRow[] }): string {
  const table = rows.map(
    (row) => `| ${row.setup} | ${row.limit} | ${row.admitted} | ${row.over} | ${row.bound} | ${percent(row.over, row.bound, 0)} |`,
  )
  const over = check.direction === 'under' ? 'short' : 'over'
  return `### ${check.mode}: bound ${check.bound}

${check.how}

| setup | limit | admitted | ${over} | bound | ${over} / bound |
|---|---|---|---|---|---|
${table.join('\n')}
`
}
