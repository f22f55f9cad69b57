// Replays a trace through one algorithm (the core's evaluateKey) and scores it against the exact rolling window.

import { evaluateKey, type PolicyRecord } from '../../packages/floodgate/src/core/evaluate.js'
import { createPolicy, type AlgorithmName, type Policy } from '../../packages/floodgate/src/core/policy.js'
import { LIMIT, PERIOD_MS, type RunSize } from './setup.js'
import { burstyArrivals, type Trace } from './traces.js'

export interface Outcome {
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

export function replay(algorithm: AlgorithmName, trace: Trace): Outcome {
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
export function rollingCounts(admittedAt: readonly number[], from: number, to: number, stepMs: number): [number, number][] {
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

/** The sliding-window counter on one bursty trace of the sweep. */
export interface SweepRow {
  readonly seed: number
  /** Admitted overall relative to the exact log (0.02: 2% more). */
  readonly over: number
  /** Worst rolling window as a multiple of the limit. */
  readonly worst: number
  /** Share of requests decided otherwise than the exact window. */
  readonly wrong: number
}

/** The sliding-window counter on many bursty traces (hour-long in a full run): how far its error spreads, by worst window. */
export function slidingWindowSweep(size: RunSize): SweepRow[] {
  return size.sweepSeeds
    .map((seed) => {
      const trace: Trace = { name: `bursty-${seed}`, about: '', clients: 1, arrivals: burstyArrivals(seed, size.durationMs) }
      const [sliding, truth] = [replay('sliding-window', trace), replay('sliding-log', trace)]
      return {
        seed,
        over: (sliding.admitted - truth.admitted) / truth.admitted,
        worst: sliding.worstWindow / LIMIT,
        wrong: (sliding.wronglyAllowed + sliding.wronglyDenied) / sliding.requests,
      }
    })
    .sort((a, b) => a.worst - b.worst)
}
