// floodgate/fastify: the Fastify plugin — `await app.register(floodgate, { limiter })`.

export { floodgate, floodgate as default, type FastifyRateLimitOptions } from './http/fastify.js'
export * from './http/index.js'
