// RedisStore on the app's own ioredis (whatever major the registry gives today), Redis at REDIS_URL.
import assert from 'node:assert/strict'
import { Redis } from 'ioredis'
import { RedisStore } from 'floodgate/redis'
import { twoAtOnce } from './support.mjs'

const client = new Redis(process.env.REDIS_URL)
const limiter = twoAtOnce(new RedisStore({ client, prefix: 'ioredis:' }))
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
