// floodgate/node: node:http — `createServer(withRateLimit(handler, { limiter }))` or `if (await limit(req, res)) …`.

export { rateLimit, withRateLimit, type NodeRateLimitOptions } from './http/node.js'
export * from './http/index.js'
