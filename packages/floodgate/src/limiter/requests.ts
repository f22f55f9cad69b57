// Checks what callers pass per call (key, cost, lease): cheap checks with errors that say what to change.

import { FloodgateError } from '../core/errors.js'
import type { Lease } from './types.js'

/** A key is any string (the caller decides what it identifies: a user, an IP, a route). */
export function checkKey(key: unknown): string {
  if (typeof key !== 'string') {
    throw new FloodgateError('INVALID_REQUEST', `key: must be a string (e.g. 'user:42' or an IP address), got ${typeof key}`)
  }
  return key
}

/** A cost is a whole number of units; `min` is 0 for limit() (0 peeks) and 1 for refund(). */
export function checkCost(cost: unknown, min: number): number {
  if (typeof cost !== 'number' || !Number.isInteger(cost) || cost < min) {
    throw new FloodgateError('INVALID_REQUEST', `cost: must be a whole number ≥ ${min}, got ${JSON.stringify(cost)}`)
  }
  return cost
}

/** A lease as limit() handed it out, or a copy of one that crossed a process boundary. */
export function checkLease(lease: unknown): Lease {
  const candidate = lease as Partial<Lease> | null
  if (
    candidate === null ||
    typeof candidate !== 'object' ||
    typeof candidate.key !== 'string' ||
    typeof candidate.cost !== 'number' ||
    !Number.isInteger(candidate.cost) ||
    candidate.cost < 1 ||
    !Array.isArray(candidate.policies) ||
    !candidate.policies.every((name) => typeof name === 'string') ||
    (candidate.acquiredAt !== undefined && !Number.isFinite(candidate.acquiredAt))
  ) {
    throw new FloodgateError('INVALID_REQUEST', 'lease: expected the lease of an admitted decision ({ key, cost, policies })')
  }
  return candidate as Lease
}
