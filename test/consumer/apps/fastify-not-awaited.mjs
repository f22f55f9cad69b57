// Fastify with the plugin registered without await: it must still limit, or refuse to start saying
// to await it. Silently limiting nothing is the failure this guards against.
import assert from 'node:assert/strict'
import Fastify from 'fastify'
import { floodgate } from 'floodgate/fastify'
import { expectLimited, twoAtOnce } from './support.mjs'

const app = Fastify()
app.register(floodgate, { limiter: twoAtOnce() })
app.get('/', async () => 'ok')
let url
try {
  url = await app.listen({ port: 0, host: '127.0.0.1' })
} catch (error) {
  assert.match(String(error.message), /await app\.register/)
  process.exit(0)
}
await expectLimited(url)
await app.close()
