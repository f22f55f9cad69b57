// floodgate/hono: Hono middleware — `app.use(rateLimit({ limiter }))`.

export { rateLimit, type HonoRateLimitOptions, type RateLimitVariables } from './http/hono.js'
export * from './http/index.js'
