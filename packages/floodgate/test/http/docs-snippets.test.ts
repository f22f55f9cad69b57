// The snippets of docs/middleware.md that exist to be copied are kept here verbatim (between
// `// snippet: name` and `// end snippet`), so `tsc --noEmit` type-checks them and these tests run
// them; a test compares the two texts so that neither drifts.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { serve } from '@hono/node-server'

// snippet: hono-variables
import { Hono } from 'hono'
import { RateLimiter } from 'floodgate'
import { rateLimit, type RateLimitVariables } from 'floodgate/hono'

const limiter = new RateLimiter({ policies: [{ name: 'burst', algorithm: 'gcra', limit: 100, period: '1m' }] })
const app = new Hono<{ Variables: RateLimitVariables }>()
app.use(rateLimit({ limiter }))
app.get('/', (c) => c.json({ remaining: c.get('rateLimit')?.remaining }))
// end snippet

const docs = readFileSync(new URL('../../../../docs/middleware.md', import.meta.url), 'utf8')
// This file's source by name: the test runner runs a compiled copy of it, without its comments.
const here = readFileSync(new URL('./docs-snippets.test.ts', import.meta.url), 'utf8')

/** The code block that follows `<!-- snippet: name … -->` in the docs. */
function documented(name: string): string {
  const match = new RegExp(`<!-- snippet: ${name}\\b[^>]*-->\\n\`\`\`ts\\n([\\s\\S]*?)\`\`\``).exec(docs)
  assert.ok(match, `docs/middleware.md has no snippet ${name}`)
  return match[1].trim()
}

/** The lines between `// snippet: name` and `// end snippet` in this file. */
function kept(name: string): string {
  const match = new RegExp(`\\n// snippet: ${name}\\n([\\s\\S]*?)\\n// end snippet`).exec(here)
  assert.ok(match, `no snippet ${name} in this file`)
  return match[1].trim()
}

describe('docs/middleware.md snippets', () => {
  it('hono-variables is the text of the docs', () => {
    assert.equal(kept('hono-variables'), documented('hono-variables'))
  })

  it("hono-variables: c.get('rateLimit') holds the decision", async () => {
    const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }) as Server
    await new Promise<void>((resolve) => (server.listening ? resolve() : server.once('listening', () => resolve())))
    try {
      const response = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`)
      assert.deepEqual(await response.json(), { remaining: 99 })
    } finally {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  })
})
