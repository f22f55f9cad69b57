// Entry point of `floodgate/api`: the request and response bodies of the service's HTTP API, for
// the service that answers them and any client that sends them.

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
