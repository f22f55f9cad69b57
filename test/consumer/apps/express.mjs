// The README's Express line in an app with its own express.
import assert from 'node:assert/strict'
import { createServer } from 'node:http'
import express from 'express'
import { rateLimit } from 'floodgate/express'
import { expectLimited, listening, twoAtOnce } from './support.mjs'

const app = express()
app.use(rateLimit({ limiter: twoAtOnce() }))
app.get('/', (req, res) => {
  assert.equal(typeof req.rateLimit?.remaining, 'number')
  res.send('ok')
})
const server = createServer(app)
await expectLimited(await listening(server))
server.close()
