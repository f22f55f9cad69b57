// The Floodgate service's HTTP API (`POST /v1/check`): its request and response bodies. The service
// answers with them and the SDK sends and reads them; this file is the contract both import.

/** One descriptor entry: a key and its value, e.g. `{ key: 'user', value: 'alice' }`. */
export interface DescriptorEntry {
  key: string
  value: string
}

/** The body of `POST /v1/check`. */
export interface CheckRequest {
  /** The rule domain, as written in the rules file. */
  domain: string
  /** One list of entries per thing to limit; each is decided on its own. */
  descriptors: DescriptorEntry[][]
  /** Units to charge each descriptor (default 1); 0 checks without charging. */
  hits?: number
}

/** A descriptor that matched a rule with limits. */
export interface LimitedResult {
  allowed: boolean
  /** Id of the matched rule. */
  rule: string
  /** Name of the deciding policy. */
  policy: string
  limit: number
  remaining: number
  /** Milliseconds until the deciding policy's window ends / it is fully restored. */
  resetMs: number
  /** 0 when allowed; otherwise milliseconds until the same request would pass (0 too when `never`). */
  retryAfterMs: number
  /** Present (true) when these hits exceed what the rule could ever admit at once: no wait helps, do not retry them. */
  never?: true
  /** The rule is in shadow mode: `allowed` is true even if it would have denied (`wouldDeny`). */
  shadow: boolean
  /** A shadow-mode rule that would have denied this request. */
  wouldDeny: boolean
  /** Which path decided: the store, the deny cache, or a failure mode of the store. */
  source: string
}

/** A descriptor whose rule is `unlimited`: always allowed, the store is not touched. */
export interface UnlimitedResult {
  allowed: true
  rule: string
  unlimited: true
}

/**
 * A descriptor whose rule another descriptor of the same request replaced (`replaces:` in the rules
 * file), as envoyproxy/ratelimit applies it: allowed, not counted. `rule` is the replaced rule's id.
 */
export interface ReplacedResult {
  allowed: true
  rule: string
  replaced: true
}

/** A descriptor no rule matched: allowed. */
export interface UnmatchedResult {
  allowed: true
  rule: null
}

export type DescriptorResult = LimitedResult | UnlimitedResult | ReplacedResult | UnmatchedResult

/** The answer of `POST /v1/check` (HTTP 200 when allowed, 429 when not). */
export interface CheckResponse {
  /** True when every descriptor is allowed. */
  allowed: boolean
  /** The longest wait among denied descriptors (0 when allowed, and when the request can never pass). */
  retryAfterMs: number
  /** Present (true) when a descriptor can never pass with these hits (see `LimitedResult.never`): do not retry. */
  never?: true
  /** One per request descriptor, in order. */
  results: DescriptorResult[]
}
