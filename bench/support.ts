// Shared benchmark helpers: closed-loop load with N concurrent callers, interleaved rounds with
// medians, and plain-text tables, so every bench measures and reports the same way.

import { writeFileSync } from 'node:fs'

/** The floors' work per call: count, and a new decision as complete as Floodgate's (one policy part). */
export function floorDecision(entry: { count: number }, now: number) {
  entry.count++
  return decisionLiteral(entry.count, now)
}

/** A new decision as complete as Floodgate's (one policy part), as the benches' floors build it. */
export function decisionLiteral(remaining: number, now: number) {
  const part = {
    name: '',
    limit: 0,
    periodMs: 0,
    allowed: true,
    remaining,
    resetMs: now,
    retryAfterMs: 0,
    delayMs: 0,
    blocked: false,
    over: false,
    shadow: false,
  }
  return {
    allowed: true,
    limit: 0,
    remaining,
    resetMs: now,
    retryAfterMs: 0,
    delayMs: 0,
    policy: '',
    over: false,
    shadow: false,
    source: 'store',
    policies: [part],
  }
}

/** The middle value (mean of the two middle values for an even count); NaN for none. */
export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

export interface LoadOptions<T = unknown> {
  /** Callers running concurrently, each awaiting its previous call before the next (closed loop). */
  callers: number
  /** Stop starting new calls after this long (ms). */
  durationMs: number
  /** …or after this many calls in total, whichever comes first. */
  maxOps: number
  /** The operation; `i` is the global call number (0-based), e.g. to pick a key. */
  op: (i: number) => Promise<T>
  /**
   * Hears each answer in the caller's own loop. A wrapper around `op` that awaited it would add a
   * promise and a suspended frame to every call: a microsecond-scale contender would pay a share of
   * its own time for it that a slow one does not notice, which skews every ratio between them.
   */
  answered?: (answer: T) => void
  /** Hears each failure (a rejection of `op`, or a throw of `answered`); without it a failure ends the run. */
  failed?: (error: unknown) => void
}

/** Calls per caller between turns of the event loop (see runLoad). */
const YIELD_EVERY = 16

export interface LoadResult {
  ops: number
  elapsedMs: number
  /** Completed calls per second over the whole run. */
  perSecond: number
}

/**
 * Runs `op` from `callers` concurrent loops until the time or count bound, and returns the
 * throughput. A closed loop (each caller waits for its answer) measures what callers actually
 * get, not how fast requests can be queued.
 */
export async function runLoad<T>(options: LoadOptions<T>): Promise<LoadResult> {
  const { callers, durationMs, maxOps, op, answered, failed } = options
  let next = 0
  let done = 0
  const start = performance.now()
  const deadline = start + durationMs
  async function caller(): Promise<void> {
    let sinceYield = 0
    while (next < maxOps && performance.now() < deadline) {
      try {
        const answer = await op(next++)
        answered?.(answer)
      } catch (error) {
        if (failed === undefined) throw error
        failed(error)
      }
      done++
      // An op that answers without I/O (a decision from a lease or a local copy) resolves in a
      // microtask: callers that never yield would starve timers and sockets for the whole run (no
      // flush, no sweep, no lease renewal until it ends). A server gets its requests from I/O, so
      // each caller lets the event loop turn every YIELD_EVERY calls.
      if (++sinceYield >= YIELD_EVERY) {
        sinceYield = 0
        await new Promise(setImmediate)
      }
    }
  }
  await Promise.all(Array.from({ length: callers }, caller))
  const elapsedMs = performance.now() - start
  return { ops: done, elapsedMs, perSecond: (done * 1000) / elapsedMs }
}

/** A contender: a name and one measurement (a rate, higher is better) per call. */
export interface Contender {
  name: string
  measure: () => Promise<number>
  /** Runs before each measurement, outside it (its time and CPU are not counted), e.g. a warm-up. */
  before?: () => Promise<void>
  /** Runs after each measurement, outside it, e.g. giving back what the contender holds. */
  after?: () => Promise<void>
}

/**
 * Runs every contender once per round for `rounds` rounds, each round starting one contender
 * later than the one before. Interleaving spreads slow phases of a noisy machine over all
 * contenders instead of one; rotating spreads what a measurement leaves behind for the next (the
 * garbage of a contender that allocates much, work Redis has yet to do), which in a fixed order
 * always lands on the same contender. Returns every contender's samples and median, in the
 * contenders' order.
 */
export async function interleavedRounds(
  contenders: readonly Contender[],
  rounds: number,
  onSample?: (name: string, round: number, value: number) => void,
): Promise<{ name: string; samples: number[]; median: number }[]> {
  const samples = contenders.map(() => [] as number[])
  for (let round = 0; round < rounds; round++) {
    for (let k = 0; k < contenders.length; k++) {
      const i = (round + k) % contenders.length
      const contender = contenders[i]
      await contender.before?.()
      const value = await contender.measure()
      await contender.after?.()
      samples[i].push(value)
      onSample?.(contender.name, round, value)
    }
  }
  return contenders.map((contender, i) => ({ name: contender.name, samples: samples[i], median: median(samples[i]) }))
}

/** `a / b` as text with two decimals and an `x`, e.g. `1.85x`; `-` when `b` is not positive. */
export function ratio(a: number, b: number): string {
  return b > 0 && Number.isFinite(a) ? `${(a / b).toFixed(2)}x` : '-'
}

/** A whole number with thousands separators, e.g. `123,456`. */
export function formatCount(value: number): string {
  return Math.round(value).toLocaleString('en-US')
}

/** Bytes as B / KiB / MiB with one decimal. */
export function formatBytes(bytes: number): string {
  if (Math.abs(bytes) < 1024) return `${Math.round(bytes)} B`
  if (Math.abs(bytes) < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`
  return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`
}

/**
 * Prints an aligned plain-text table: text columns left-aligned, columns whose cells all look
 * numeric right-aligned.
 */
export function printTable(headers: readonly string[], rows: readonly (readonly string[])[], title?: string): void {
  const widths = headers.map((header, c) => Math.max(header.length, ...rows.map((row) => (row[c] ?? '').length)))
  const numeric = headers.map((_, c) => rows.length > 0 && rows.every((row) => /^[-+]?[\d,.]+\s*[a-zA-Z%/]*$|^-$/.test(row[c] ?? '')))
  const line = (cells: readonly string[]): string =>
    cells
      .map((cell, c) => (numeric[c] ? cell.padStart(widths[c]) : cell.padEnd(widths[c])))
      .join('  ')
      .trimEnd()
  if (title !== undefined) console.log(`\n${title}`)
  console.log(line(headers))
  console.log(widths.map((w) => '-'.repeat(w)).join('  '))
  for (const row of rows) console.log(line(row))
}

/**
 * Writes a bench's figures as JSON to the file named by BENCH_JSON, when it is set: how
 * `npm run bench:report` (bench/report.ts) collects them for docs/benchmarks.md and its charts.
 */
export function writeResults(results: unknown): void {
  const file = process.env.BENCH_JSON
  if (file !== undefined && file !== '') writeFileSync(file, `${JSON.stringify(results, null, 2)}\n`)
}

/** One contender's calls, denials and failures over all rounds. */
export interface Tally {
  calls: number
  denied: number
  failed: number
  firstError?: string
}

/** An op for runLoad with its answers and failures counted (see Tallies.counted). */
export type CountedOp<T> = Required<Pick<LoadOptions<T>, 'op' | 'answered' | 'failed'>>

/**
 * Denials and failures per contender over all rounds. Every contender should show zero of both:
 * a denial is cheaper work than an admission and a failure is no work, so either would flatter
 * the contender. Failures are counted instead of thrown so one bad call does not end the bench.
 */
export class Tallies {
  readonly byName = new Map<string, Tally>()

  of(name: string): Tally {
    let tally = this.byName.get(name)
    if (tally === undefined) {
      tally = { calls: 0, denied: 0, failed: 0 }
      this.byName.set(name, tally)
    }
    return tally
  }

  /**
   * `op` for runLoad, counting its calls, denials (`isDenied` of its answer, or `deniedBy` of its
   * rejection for an API that denies by rejecting) and failures (a rejection, or a throw of
   * `isDenied`) into `name`'s tally. Spread it into runLoad's options.
   */
  counted<T>(
    name: string,
    op: (i: number) => Promise<T>,
    isDenied: (answer: T) => boolean,
    deniedBy: (reason: unknown) => boolean = () => false,
  ): CountedOp<T> {
    const tally = this.of(name)
    return {
      op: (i) => {
        tally.calls++
        return op(i)
      },
      answered: (answer) => {
        if (isDenied(answer)) tally.denied++
      },
      failed: (reason) => {
        if (deniedBy(reason)) {
          tally.denied++
          return
        }
        tally.failed++
        tally.firstError ??= String(reason)
      },
    }
  }

  /** Every tally as a table row: name, calls, denied, failed, first failure. */
  rows(): string[][] {
    return [...this.byName].map(([name, t]) => [
      name,
      formatCount(t.calls),
      formatCount(t.denied),
      formatCount(t.failed),
      t.firstError ?? '-',
    ])
  }
}

/** The load of one round: how many callers, for how long, and at most how many calls. */
export interface RoundLoad {
  callers: number
  durationMs: number
  maxOps: number
}

/**
 * A contender that runs `op` for one round's `load` per measurement, under a key prefix of its own
 * per round (`<prefix>-<round>`, so a round never meets the keys the one before wrote), its calls
 * tallied under `name`. Measures calls per second.
 */
export function roundsContender<T>(
  name: string,
  load: RoundLoad,
  tallies: Tallies,
  prefix: string,
  op: (prefix: string, i: number) => Promise<T>,
  isDenied: (answer: T) => boolean,
): Contender {
  let round = 0
  return {
    name,
    async measure() {
      const roundPrefix = `${prefix}-${round++}`
      const result = await runLoad({ ...load, ...tallies.counted(name, (i) => op(roundPrefix, i), isDenied) })
      return result.perSecond
    },
  }
}

/**
 * Warms each contender once, runs the interleaved rounds printing each sample, then prints the
 * throughput table (median, min, max, ratio to the first contender, named `vs <baseLabel>`) and the
 * tallies' denials and failures. Returns the rounds' results.
 */
export async function printRoundsAgainstFirst(
  contenders: readonly Contender[],
  rounds: number,
  baseLabel: string,
  tallies: Tallies,
): Promise<{ name: string; samples: number[]; median: number }[]> {
  for (const c of contenders) await c.measure() // warm-up: connections (and handshakes), JIT
  const results = await interleavedRounds(contenders, rounds, (name, round, value) =>
    console.log(`  round ${round + 1} ${name}: ${formatCount(value)}/s`),
  )
  const base = results[0].median
  printTable(
    ['contender', 'median decisions/s', 'min', 'max', `vs ${baseLabel}`],
    results.map((r) => [
      r.name,
      formatCount(r.median),
      formatCount(Math.min(...r.samples)),
      formatCount(Math.max(...r.samples)),
      ratio(r.median, base),
    ]),
    'Throughput over 10k keys (median of rounds)',
  )
  printTable(['contender', 'calls', 'denied', 'failed', 'first failure'], tallies.rows(), 'Denials and failures (all should be 0)')
  return results
}
