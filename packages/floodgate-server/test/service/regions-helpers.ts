// Two `floodgate serve` regions for the service's region tests: each on its own redis-server, each
// reaching the other's Redis through a latency proxy that a test can cut (a partition) and heal.

import assert from 'node:assert/strict'
import { startRedis, type RedisProcess } from '../../../floodgate/test/support/redis-server.js'
import { startProxy, type LinkProxy } from '../../../floodgate/test/regions/support.js'
import { startTestService, type TestService } from './helpers.js'

export interface TwoRegions {
  /** eu's Redis, then us's. */
  redis: RedisProcess[]
  /** eu's link to us's Redis, then us's link to eu's. */
  links: LinkProxy[]
  eu: TestService
  us: TestService
  stop(): Promise<void>
}

/** Starts regions eu and us serving `rules` on `--redis`, with `flags` added to both command lines. */
export async function startTwoRegions(
  rules: string,
  { latencyMs, flags = [] }: { latencyMs: number; flags?: string[] },
): Promise<TwoRegions> {
  const redis = [await startRedis(), await startRedis()]
  const links = [await startProxy(redis[1].port, latencyMs), await startProxy(redis[0].port, latencyMs)]
  const serve = (redisUrl: string, region: string, peer: string) =>
    startTestService(rules, [
      '--redis',
      redisUrl,
      ...flags,
      '--store-timeout',
      '5s',
      '--region',
      region,
      '--peer',
      peer,
      '--region-interval',
      '50ms',
    ])
  const eu = await serve(redis[0].url, 'eu', `us=${links[0].url}`)
  const us = await serve(redis[1].url, 'us', `eu=${links[1].url}`)
  return {
    redis,
    links,
    eu,
    us,
    async stop() {
      await eu.stop()
      await us.stop()
      for (const link of links) await link.close()
      for (const server of redis) await server.stop()
    },
  }
}

/** Polls `probe` until it holds: the regions converge on their own timers, in their own processes. */
export async function eventually(probe: () => Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (await probe()) return
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  assert.fail(`timed out waiting for ${what}`)
}

export async function readyz(service: TestService): Promise<{ status: string; reason: string }> {
  return (await (await fetch(`${service.httpUrl}/readyz`)).json()) as { status: string; reason: string }
}
