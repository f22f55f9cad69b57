// What a one-policy kernel (kernels/, generated from each algorithm's definition) decides into.

import type { PolicyResult } from '../../core/evaluate.js'
import type { Policy } from '../../core/policy.js'

/**
 * A kernel's step result: the fields of a StepResult, with the new state as numbers of its own
 * (`n0`…`n2`, as many as the algorithm's state words) instead of an array, and the record's ttl
 * once decided. One per store, rewritten by every call: a kernel allocates nothing.
 */
export interface KernelStep {
  allowed: boolean
  remaining: number
  resetMs: number
  retryAfterMs: number
  delayMs: number
  n0: number
  n1: number
  n2: number
  /** After `decide`: how long the record is kept from now (ms, ≥ 1). */
  ttlMs: number
  /** Never set by a kernel (it decides no key under a block): MemoryStore.decideOne's answer. */
  blocked: boolean
}

/**
 * One request decided on a record's words in place (see the generated kernels' `decide`): `base`
 * is the record's first word in `f64`. False when the general path must decide it (nothing written).
 */
export type Kernel = (f64: Float64Array, base: number, now: number, cost: number, policy: Policy, out: KernelStep) => boolean

export function createKernelStep(): KernelStep {
  return { allowed: true, remaining: 0, resetMs: 0, retryAfterMs: 0, delayMs: 0, n0: 0, n1: 0, n2: 0, ttlMs: 1, blocked: false }
}

/** Writes a kernel's answer into a policy's result (a kernel decides no key under a block); answers `allowed`. */
export function resultOfStep(step: KernelStep, result: PolicyResult): boolean {
  result.allowed = step.allowed
  result.remaining = step.remaining
  result.resetMs = step.resetMs
  result.retryAfterMs = step.retryAfterMs
  result.delayMs = step.delayMs
  result.blocked = false
  return step.allowed
}

/** Writes a policy's result into a kernel's step, which then answers for it (MemoryStore.decideOne). */
export function stepOfResult(result: PolicyResult, step: KernelStep): void {
  step.allowed = result.allowed
  step.remaining = result.remaining
  step.resetMs = result.resetMs
  step.retryAfterMs = result.retryAfterMs
  step.delayMs = result.delayMs
  step.blocked = result.blocked
}
