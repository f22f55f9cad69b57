// Entry point of `floodgate/client`: the SDK for calling a running Floodgate service.

export { FloodgateClient, FloodgateClientError, type FloodgateClientOptions } from './client/floodgate-client.js'
export { withRetry, parseRetryAfter, type RetryOptions } from './client/retry.js'
export type { ClientDuration } from './client/duration.js'
export type {
  CheckRequest,
  CheckResponse,
  CheckResult,
  DescriptorEntry,
  DescriptorResult,
  LimitedResult,
  UnlimitedResult,
  UnmatchedResult,
} from './client/types.js'
