// Entry point of `floodgate/client`: the SDK for calling a running Floodgate service.

export { FloodgateClient, FloodgateClientError, type FloodgateClientOptions } from './client/floodgate-client.js'
export { withRetry, parseRetryAfter, RetryAfterTooLongError, type RetryOptions, type RetryTimers } from './client/retry.js'
export type { ClientDuration } from './client/duration.js'
export type { CheckResult } from './client/types.js'
export type {
  CheckRequest,
  CheckResponse,
  DescriptorEntry,
  DescriptorResult,
  LimitedResult,
  UnlimitedResult,
  ReplacedResult,
  UnmatchedResult,
} from './api/check.js'
