// Random decision traces shared by the stores' equivalence tests (Redis and memcached against the core).

import fc from 'fast-check'
import type { AlgorithmName, PolicyOptions } from '../../src/core/policy.js'

/**
 * Options of a policy named `name`, of one of `algorithms`: small limits (so traces reach them),
 * periods short and long, sometimes a burst, a block, and leaky-bucket's shaping.
 */
export function policyOptionsArbitrary(name: string, algorithms: readonly AlgorithmName[]): fc.Arbitrary<PolicyOptions> {
  return fc
    .record({
      algorithm: fc.constantFrom(...algorithms),
      limit: fc.integer({ min: 1, max: 8 }),
      period: fc.oneof(fc.integer({ min: 1, max: 50 }), fc.integer({ min: 51, max: 5_000 })),
      burst: fc.option(fc.integer({ min: 1, max: 12 }), { nil: undefined }),
      shaping: fc.boolean(),
      blockMs: fc.option(fc.integer({ min: 1, max: 3_000 }), { nil: undefined, freq: 3 }),
    })
    .map(
      ({ algorithm, shaping, ...rest }): PolicyOptions => ({
        name,
        algorithm,
        ...rest,
        ...(algorithm === 'leaky-bucket' ? { shaping } : {}),
      }),
    )
}

/** A request's cost: mostly a charge, sometimes a peek (0), now and then a refund. */
export const costArbitrary = fc.oneof(
  { arbitrary: fc.integer({ min: 1, max: 3 }), weight: 6 },
  { arbitrary: fc.constant(0), weight: 2 },
  { arbitrary: fc.integer({ min: -3, max: -1 }), weight: 1 },
)

/** How far the clock moves before a request: not at all, within a short period, or past long ones. */
export const advanceArbitrary = fc.oneof(
  { arbitrary: fc.constant(0), weight: 2 },
  { arbitrary: fc.integer({ min: 1, max: 60 }), weight: 5 },
  { arbitrary: fc.integer({ min: 61, max: 8_000 }), weight: 2 },
)
