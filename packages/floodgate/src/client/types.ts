// What the SDK adds to the service's wire types (src/api/check.ts): its answer when the service could not be asked.

import type { CheckResponse } from '../api/check.js'

/** What `FloodgateClient.check` returns: the service's answer, or a failure-mode answer with `error` set. */
export interface CheckResult extends CheckResponse {
  /** Set when the service could not be asked (timeout, network, server error); `allowed` then follows `failOpen`. */
  error?: string
}
