// docs/middleware.md "Keys": a key function that calls keys.ip() and keys.user() for its parts, each
// part with its own policies (createPolicies), all of which must admit.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import type { AddressInfo } from 'node:net'
import { documented, kept } from './doc-snippet.js'

// snippet: key-parts
import express from 'express'
import { RateLimiter, createPolicies } from 'floodgate'
import { keys, rateLimit } from 'floodgate/express'

const limiter = new RateLimiter({ policies: [{ name: 'ip', algorithm: 'gcra', limit: 100, period: '1m' }] })
const perUser = createPolicies([{ name: 'user', algorithm: 'sliding-window', limit: 1000, period: '1h' }])
const byIp = keys.ip()
const byUser = keys.user('x-user-id')

const app = express()
app.use(
  rateLimit({
    limiter,
    // Per IP (the limiter's own policies) and, for signed-in users, per user too: both must admit.
    key: async (req, info) => {
      const ip = await byIp(req, info)
      const user = await byUser(req, info)
      return [ip === undefined ? undefined : { key: ip }, user === undefined ? undefined : { key: user, policies: perUser }]
    },
  }),
)
// end snippet

app.get('/', (req, res) => {
  res.json(req.rateLimit?.policies.map((policy) => policy.name))
})

describe('docs/middleware.md: key-parts', () => {
  it('is the text of the docs', () => {
    assert.equal(kept('key-parts', 'docs-key-parts.test.ts'), documented('key-parts'))
  })

  it('decides the IP part by the limiter and the user part by its own policies, when there is a user', async () => {
    const server = app.listen(0, '127.0.0.1')
    await new Promise((resolve) => server.once('listening', resolve))
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`
      assert.deepEqual(await (await fetch(url)).json(), ['ip'])
      assert.deepEqual(await (await fetch(url, { headers: { 'x-user-id': '42' } })).json(), ['ip', 'user'])
    } finally {
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    }
  })
})
