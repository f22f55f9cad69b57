// MemcachedStore on the app's memjs: the store creates its client from `servers`, and takes one the app made.
import assert from 'node:assert/strict'
import memjs from 'memjs'
import { MemcachedStore } from 'floodgate/memcached'
import { twoAtOnce } from './support.mjs'

// memjs's 0.5 s request timeout (twice that to connect) is sometimes outlasted by a first connection
// on a busy machine: a patient client, as the limiter's own timeout here is.
const created = new MemcachedStore({ servers: [process.env.MEMCACHED_ADDRESS], prefix: 'created:', memjs: { timeout: 10 } })
const client = memjs.Client.create(process.env.MEMCACHED_ADDRESS, { timeout: 10, logger: { log: () => {} } })
const given = new MemcachedStore({ client, prefix: 'given:' })
for (const store of [created, given]) {
  const limiter = twoAtOnce(store)
  const decisions = [await limiter.limit('user'), await limiter.limit('user'), await limiter.limit('user')]
  assert.deepEqual(
    decisions.map((d) => [d.allowed, d.source]),
    [
      [true, 'store'],
      [true, 'store'],
      [false, 'store'],
    ],
  )
  await store.close()
}
client.close()
