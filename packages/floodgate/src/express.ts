// floodgate/express: Express middleware — `app.use(rateLimit({ limiter }))`.

export { rateLimit, type ExpressRateLimitOptions } from './http/express.js'
export * from './http/index.js'
