// Every framework adapter answers a request that can never pass with 413 and no Retry-After (real listening servers).

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { RateLimiter } from '../../src/limiter/rate-limiter.js'
import { FRAMEWORKS, get } from './support/apps.js'

describe('a request whose cost exceeds what the policy could ever admit', () => {
  for (const framework of FRAMEWORKS) {
    it(`${framework.name}: 413, no Retry-After, a body saying it will never pass; smaller requests still pass`, async () => {
      const limiter = new RateLimiter({ policies: [{ name: 'upload', algorithm: 'token-bucket', limit: 10, period: '1m' }] })
      const app = await framework.start({
        limiter,
        cost: (req) =>
          Number(
            new URL(String((req as { url?: string }).url ?? (req as { req?: { url: string } }).req?.url), 'http://x').searchParams.get(
              'cost',
            ) ?? 1,
          ),
      })
      try {
        const huge = await get(app, '/ok?cost=11')
        assert.equal(huge.status, 413, huge.text)
        assert.equal(huge.headers.get('retry-after'), null)
        assert.equal(JSON.parse(huge.text).never, true)
        assert.equal(huge.headers.get('x-ratelimit-remaining'), '10')
        const fits = await get(app, '/ok?cost=10')
        assert.equal(fits.status, 200)
        const over = await get(app, '/ok?cost=1')
        assert.equal(over.status, 429)
        assert.ok(Number(over.headers.get('retry-after')) >= 1)
      } finally {
        await app.close()
      }
    })
  }
})
