import assert from 'node:assert/strict'
import { serve } from '@hono/node-server'
import { Hono } from 'hono'
import { rateLimit } from 'floodgate/hono'
import { expectLimited, twoAtOnce } from './support.mjs'

const app = new Hono()
app.use(rateLimit({ limiter: twoAtOnce() }))
app.get('/', (c) => {
  assert.equal(typeof c.get('rateLimit')?.remaining, 'number')
  return c.text('ok')
})
const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' })
await new Promise((resolve) => server.once('listening', resolve))
await expectLimited(`http://127.0.0.1:${server.address().port}/`)
server.close()
