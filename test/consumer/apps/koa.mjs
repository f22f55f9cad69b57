import assert from 'node:assert/strict'
import { createServer } from 'node:http'
import Koa from 'koa'
import { rateLimit } from 'floodgate/koa'
import { expectLimited, listening, twoAtOnce } from './support.mjs'

const app = new Koa()
app.use(rateLimit({ limiter: twoAtOnce() }))
app.use((ctx) => {
  assert.equal(typeof ctx.state.rateLimit?.remaining, 'number')
  ctx.body = 'ok'
})
const server = createServer(app.callback())
await expectLimited(await listening(server))
server.close()
