// docs/middleware.md "Answering a denial yourself": Express's handler gets (req, res, next, rejection).

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import type { AddressInfo } from 'node:net'
import { documented, kept } from './doc-snippet.js'

// snippet: express-handler
import express from 'express'
import { RateLimiter } from 'floodgate'
import { rateLimit } from 'floodgate/express'

const limiter = new RateLimiter({ policies: [{ name: 'burst', algorithm: 'gcra', limit: 100, period: '1m' }] })
const app = express()
app.use(
  rateLimit({
    limiter,
    handler: (req, res, _next, rejection) => {
      res.status(rejection.reject.status).json({ error: 'slow down', path: req.path, retryInMs: rejection.decision.retryAfterMs })
    },
  }),
)
// end snippet

app.get('/', (_req, res) => {
  res.send('ok')
})

describe('docs/middleware.md: express-handler', () => {
  it('is the text of the docs', () => {
    assert.equal(kept('express-handler', 'docs-express-handler.test.ts'), documented('express-handler'))
  })

  it('answers a denial with its own body, the headers already set', async () => {
    const server = app.listen(0, '127.0.0.1')
    await new Promise((resolve) => server.once('listening', resolve))
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`
      // GCRA refills one every 600 ms, so on a slow machine the denial may come a little after the 101st.
      let denied = await fetch(url)
      for (let i = 1; i < 300 && denied.status === 200; i++) denied = await fetch(url)
      assert.equal(denied.status, 429)
      assert.ok(Number(denied.headers.get('retry-after')) > 0, 'Retry-After is set before the handler runs')
      const body = (await denied.json()) as { error: string; path: string; retryInMs: number }
      assert.equal(body.error, 'slow down')
      assert.equal(body.path, '/')
      assert.ok(body.retryInMs > 0)
    } finally {
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    }
  })
})
