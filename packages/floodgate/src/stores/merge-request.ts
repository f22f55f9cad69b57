// Checks a Store.merge request, for every store alike: bad input is refused with a clear error, never half applied.

import { mergeRefusal } from '../core/merge.js'
import type { MergeRequest } from './store.js'

/** What is wrong with `request` (a sentence naming the field), or undefined when it is sound. */
export function mergeRequestProblem(request: MergeRequest): string | undefined {
  if (request === null || typeof request !== 'object') return 'each merge request must be an object { key, policies, units }'
  if (typeof request.key !== 'string') return `key must be a string, got ${typeof request.key}`
  if (!Array.isArray(request.policies) || request.policies.length === 0) {
    return `key ${JSON.stringify(request.key)}: give at least one policy`
  }
  for (const policy of request.policies) {
    const refusal = mergeRefusal(policy.algorithm, policy.shaping)
    if (refusal !== undefined) return `policies: ${policy.name} cannot be merged: ${refusal}`
  }
  if (typeof request.units !== 'number' || !Number.isSafeInteger(request.units)) {
    return `units must be a whole number, got ${String(request.units)}`
  }
  if (request.now !== undefined && (typeof request.now !== 'number' || !Number.isFinite(request.now))) {
    return `now must be a finite number of milliseconds, got ${String(request.now)}`
  }
  if ((request.origin === undefined) !== (request.seq === undefined)) {
    return 'origin and seq go together: give both (an idempotent merge) or neither'
  }
  if (request.origin !== undefined) {
    if (typeof request.origin !== 'string' || request.origin.length === 0 || request.origin.length > 200) {
      return `origin must be a non-empty string of at most 200 characters, got ${JSON.stringify(request.origin)}`
    }
    if (typeof request.seq !== 'number' || !Number.isSafeInteger(request.seq) || request.seq < 0) {
      return `seq must be a whole number ≥ 0, got ${String(request.seq)}`
    }
  }
  return undefined
}
