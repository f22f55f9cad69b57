// The framework-neutral HTTP pieces every middleware entry re-exports: key generators, header and body writers, types.

export { keys, NOT_LIMITED, type KeyGenerator, type KeyPart, type KeyResult, type RequestInfo, type StringKeyGenerator } from './keys.js'
export { descriptor, type RequestDescriptors, type RulesKeyOptions, type RulesSource } from './rules-key.js'
export { ipKey } from './ip-key.js'
export { clientIp, compileProxyTrust, type ForwardedHeader, type ProxyTrust, type TrustProxy } from './client-ip.js'
export { DEFAULT_HEADER_STYLES, rateLimitHeaders, type HeaderList, type HeaderStyle } from './headers.js'
export { QUOTA_EXCEEDED_TYPE, rejectBody, type BodyFormat, type RejectBody } from './responses.js'
export type { HttpLimiter, HttpLimitOptions, HttpWarning } from './options.js'
export type { Rejection } from './limit-request.js'
