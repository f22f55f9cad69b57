// The runner script: its SHA is pinned, and a server that lost it (SCRIPT FLUSH, restart) gets it back invisibly.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { Redis } from 'ioredis'
import { createPolicies } from '../../../src/core/policy.js'
import { RedisStore } from '../../../src/redis.js'
import { FloodgateError } from '../../../src/core/errors.js'
import { runnerScript } from '../../../src/stores/redis/scripts.js'
import { useRedis } from '../../support/redis-store.js'

/**
 * SHA1 of prelude + every algorithm twin + runner. A failure here means a .lua file changed: check
 * the change is meant (and its TypeScript twin changed with it), then update this value.
 */
const PINNED_SHA = 'd9705bb824810f91213386ca377c59fded74822c'

const redis = useRedis()

const policies = createPolicies([{ name: 'many', algorithm: 'fixed-window', limit: 100_000, period: '1h' }])

async function fallbacks(): Promise<number> {
  const info = await redis.admin.info('commandstats')
  return Number(/^cmdstat_eval:calls=(\d+)/m.exec(info)?.[1] ?? 0)
}

test('the script is the one pinned, and Redis computes the same SHA for it', async () => {
  const script = runnerScript()
  assert.equal(script.sha, PINNED_SHA, 'a .lua file changed: review it, then update PINNED_SHA')
  assert.equal(await redis.admin.script('LOAD', script.source), script.sha)
  assert.match(script.source, /^#!lua flags=allow-cross-slot-keys\n/)
})

test('SCRIPT FLUSH mid-run: every call still succeeds and counts exactly once', async () => {
  const client = new Redis(redis.server.port, redis.server.host)
  const store = new RedisStore({ client, prefix: 'flush:' })
  try {
    await redis.admin.config('RESETSTAT')
    const seen: number[] = []
    for (let round = 0; round < 20; round++) {
      // The flush is sent in the same tick as the calls, so it races with their EVALSHA.
      const calls = Array.from({ length: 10 }, () => store.evaluate([{ key: 'k', policies, cost: 1, now: 0 }]))
      const flushed = round % 2 === 0 ? redis.admin.script('FLUSH') : Promise.resolve()
      const responses = await Promise.all(calls)
      await flushed
      for (const [response] of responses) {
        assert.equal(response.allowed, true)
        seen.push(response.results[0].remaining)
      }
    }
    assert.deepEqual(
      seen,
      Array.from({ length: 200 }, (_, i) => 100_000 - 1 - i),
      'each call charged exactly once, in order',
    )
    assert.ok((await fallbacks()) >= 5, 'the NOSCRIPT path was taken')
  } finally {
    await store.close()
    client.disconnect()
  }
})

test('a stopped server refuses calls at once; restarted (empty, no scripts) it is used again once ioredis reconnects', async () => {
  const store = new RedisStore({ url: redis.server.url, prefix: 'restart:' })
  try {
    const [before] = await store.evaluate([{ key: 'k', policies, cost: 1 }])
    assert.equal(before.results[0].remaining, 99_999)

    await redis.server.stop()
    if (store.connected) await once(store, 'unavailable')
    // Refused at once rather than queued by ioredis, so it can never be applied after the restart.
    await assert.rejects(
      store.evaluate([{ key: 'k', policies, cost: 1 }]),
      (error: unknown) => error instanceof FloodgateError && error.code === 'STORE_UNAVAILABLE',
    )
    await redis.server.restart()
    if (!store.connected) await once(store, 'available')
    const [first] = await store.evaluate([{ key: 'k', policies, cost: 1 }])
    assert.equal(first.results[0].remaining, 99_999, 'the restarted server starts empty, and the refused call was not replayed')

    await redis.admin.script('FLUSH') // admin reconnected too; a flush after the restart for good measure
    const responses = await Promise.all(Array.from({ length: 5 }, () => store.evaluate([{ key: 'k', policies, cost: 1 }])))
    assert.deepEqual(
      responses.map(([r]) => r.results[0].remaining),
      [99_998, 99_997, 99_996, 99_995, 99_994],
    )
  } finally {
    await store.close()
  }
})
