// floodgate/koa: Koa middleware — `app.use(rateLimit({ limiter }))`.

export { rateLimit, type KoaRateLimitOptions } from './http/koa.js'
export * from './http/index.js'
