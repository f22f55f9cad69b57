// The one setup every part of the accuracy report shares: the limit, its period, the algorithms, and a run's size.

import type { AlgorithmName } from '../../packages/floodgate/src/core/policy.js'

export const LIMIT = 100
export const PERIOD_MS = 60_000
export const ALGORITHMS: AlgorithmName[] = ['fixed-window', 'sliding-window', 'sliding-log', 'token-bucket', 'leaky-bucket', 'gcra']

/** A run's size: CI's quick run replays shorter traces, fewer of them. */
export interface RunSize {
  readonly quick: boolean
  /** Length of every trace. */
  readonly durationMs: number
  /** Seeds of the bursty traces the sliding-window sweep replays (the single bursty trace is seed 2). */
  readonly sweepSeeds: readonly number[]
  /** Clients of the crowd trace. */
  readonly crowdClients: number
}

export function runSize(quick: boolean): RunSize {
  return {
    quick,
    durationMs: quick ? 10 * 60_000 : 60 * 60_000,
    sweepSeeds: Array.from({ length: quick ? 6 : 40 }, (_, i) => 100 + i),
    crowdClients: quick ? 200 : 1_000,
  }
}
