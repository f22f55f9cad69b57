// Fastify with the plugin awaited, as docs/middleware.md shows it.
import Fastify from 'fastify'
import { floodgate } from 'floodgate/fastify'
import { expectLimited, twoAtOnce } from './support.mjs'

const app = Fastify()
await app.register(floodgate, { limiter: twoAtOnce() })
app.get('/', async (request) => ({ remaining: request.rateLimit.remaining }))
await expectLimited(await app.listen({ port: 0, host: '127.0.0.1' }))
await app.close()
