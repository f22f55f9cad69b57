// Bounds a store call in time, so a slow or vanished store turns into the limiter's failure mode.

import { FloodgateError } from '../core/errors.js'

/**
 * Settles like `promise`, or rejects with STORE_TIMEOUT after `ms`. The original promise keeps a
 * handler either way, so a late rejection (e.g. a connection error after the timeout) is never
 * an unhandled rejection.
 */
export function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(new FloodgateError('STORE_TIMEOUT', `the store did not answer within ${ms}ms; check the store, or raise the limiter's timeout option`))
    }, ms)
    promise.then(
      (value) => {
        clearTimeout(timer)
        resolve(value)
      },
      (error: unknown) => {
        clearTimeout(timer)
        reject(error)
      },
    )
  })
}
