// Typed errors a user can cause: each carries a stable code and says what to change.

export type FloodgateErrorCode =
  | 'INVALID_DURATION'
  | 'INVALID_POLICY'
  | 'INVALID_OPTION'
  | 'INVALID_CONFIG'
  | 'INVALID_REQUEST'
  | 'STORE_TIMEOUT'
  | 'STORE_UNAVAILABLE'
  | 'SYNC_UNSUPPORTED'

/** An error caused by input (an option, a config file, a request), not by a bug in Floodgate. */
export class FloodgateError extends Error {
  readonly code: FloodgateErrorCode

  constructor(code: FloodgateErrorCode, message: string) {
    super(message)
    this.name = 'FloodgateError'
    this.code = code
  }
}
