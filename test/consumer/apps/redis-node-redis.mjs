// RedisStore on the official node-redis client (the `redis` package), Redis at REDIS_URL.
import assert from 'node:assert/strict'
import { createClient } from 'redis'
import { RedisStore } from 'floodgate/redis'
import { twoAtOnce } from './support.mjs'

const client = createClient({ url: process.env.REDIS_URL })
await client.connect()
const limiter = twoAtOnce(new RedisStore({ client, prefix: 'node-redis:' }))
const decisions = [await limiter.limit('user'), await limiter.limit('user'), await limiter.limit('user')]
assert.deepEqual(
  decisions.map((d) => [d.allowed, d.source]),
  [
    [true, 'store'],
    [true, 'store'],
    [false, 'store'],
  ],
)
await client.quit()
