// Shared by the consumer apps: a limiter that lets two requests through and refuses a third, and a
// check that a server answers 200, 200, then 429 with rate-limit headers, as a user would see it.
import assert from 'node:assert/strict'
import { RateLimiter } from 'floodgate'

// A store that answers must never time out here, however busy the machine (a first call connects and
// loads the script): the timeout is far longer than any answer.
// GCRA, not a fixed window: a fixed window starts on the clock's minute, so three requests that
// straddle a minute boundary all pass (about one run in twelve). GCRA's burst of two starts at the
// first request, and the third waits half an hour, far beyond this app's 30 s: the third is refused
// whatever the time of day or the machine's speed.
export function twoAtOnce(store) {
  return new RateLimiter({ store, timeout: '30s', policies: [{ name: 'two', algorithm: 'gcra', limit: 2, period: '1h' }] })
}

export async function expectLimited(url) {
  const statuses = []
  for (let i = 0; i < 3; i++) {
    const response = await fetch(url)
    statuses.push(response.status)
    if (i === 0)
      assert.ok(
        response.headers.get('x-ratelimit-limit') ?? response.headers.get('ratelimit-policy'),
        'rate-limit headers on an allowed response',
      )
    if (i === 2) assert.ok(response.headers.get('retry-after'), 'Retry-After on a 429')
    await response.arrayBuffer()
  }
  assert.deepEqual(statuses, [200, 200, 429])
}

export function listening(server) {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${server.address().port}/`)))
}
