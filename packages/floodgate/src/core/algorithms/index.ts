// The registry: each algorithm name of core/policy.ts's ALGORITHMS (the one list of names) mapped to
// its module. A Record over AlgorithmName, so the compiler rejects a name left out or unknown.

import type { AlgorithmName } from '../policy.js'
import type { Algorithm } from './types.js'
import { fixedWindow } from './fixed-window.js'
import { slidingWindow } from './sliding-window.js'
import { slidingLog } from './sliding-log.js'
import { tokenBucket } from './token-bucket.js'
import { leakyBucket } from './leaky-bucket.js'
import { gcra } from './gcra.js'
import { concurrency } from './concurrency.js'

export const ALGORITHM_BY_NAME: Readonly<Record<AlgorithmName, Algorithm>> = Object.freeze({
  'fixed-window': fixedWindow,
  'sliding-window': slidingWindow,
  'sliding-log': slidingLog,
  'token-bucket': tokenBucket,
  'leaky-bucket': leakyBucket,
  gcra,
  concurrency,
})

export type { Algorithm, State, StepResult } from './types.js'
