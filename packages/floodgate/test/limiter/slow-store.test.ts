// A slow store is not a dead store (issue 26 §3), on real servers and real processes, with every
// limiter option at its default: four processes on one hot key beside two busy loops admit at most
// 1.1 × the limit, also through a link that makes every answer slower than the old fixed 100 ms
// timeout; a store that stops answering (SIGSTOP) still gets every caller an answer within the
// timeout's maximum, and open's ceiling bounds what it admits meanwhile, exact and leased alike.
//
// Nothing here depends on the machine's speed: the counts hold however slow the answers are (the
// adaptive timeout follows them), and the only time asserted is a generous cap.

import assert from 'node:assert/strict'
import { spawn, type ChildProcess } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { after, before, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Redis } from 'ioredis'
import type { PolicyOptions } from '../../src/core/policy.js'
import { RateLimiter } from '../../src/index.js'
import type { Decision } from '../../src/index.js'
import { DEFAULT_TIMEOUT_MAX_MS } from '../../src/limiter/options.js'
import { RedisStore } from '../../src/redis.js'
import { startProxy, type LinkProxy } from '../regions/support.js'
import { startMemcached, type MemcachedProcess } from '../support/memcached-server.js'
import { startRedis, type RedisProcess } from '../support/redis-server.js'
import { Workers } from '../support/workers.js'
import type { SlowStoreConfig, SlowStoreReport } from './slow-store-worker.js'

const WORKER = fileURLToPath(new URL('./slow-store-worker.ts', import.meta.url))
const LIMIT = 300
// A sliding window of a day: no window boundary (and no refill worth a request) within a run,
// whenever it runs.
const POLICIES: PolicyOptions[] = [{ algorithm: 'sliding-window', limit: LIMIT, period: '1d' }]
// Each way: every round trip is slower than the old fixed 100 ms timeout, however fast the machine.
const SLOW_LINK_MS = 60

/** Two processes that keep a core busy each, as the loaded machine of the report. */
function busyLoops(count: number): ChildProcess[] {
  return Array.from({ length: count }, () => spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }))
}

function stopAll(children: readonly ChildProcess[]): void {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
}

function portOf(proxy: LinkProxy): number {
  return Number(new URL(proxy.url).port)
}

async function hotKey(
  workers: Workers,
  kind: SlowStoreConfig['kind'],
  port: number,
  via: string,
  t: { diagnostic(message: string): void },
) {
  const config: SlowStoreConfig = {
    kind,
    host: '127.0.0.1',
    port,
    key: `hot:${via}:${randomUUID()}`,
    policies: POLICIES,
    // 2,400 decisions in all: eight times the limit.
    requests: 600,
    inflight: 16,
  }
  const reports = await workers.run<SlowStoreConfig, SlowStoreReport>(4, config)
  const admitted = reports.reduce((sum, report) => sum + report.admitted, 0)
  const perWorker = reports.map((r) => `${r.admitted} ${JSON.stringify(r.sources)} slowest ${r.slowestMs}ms`)
  t.diagnostic(`${kind} ${via}: admitted ${admitted} of ${LIMIT}; per worker ${perWorker.join(' | ')}`)
  assert.ok(admitted <= 1.1 * LIMIT, `${kind} ${via}: ${admitted} admitted, above 1.1 × ${LIMIT}`)
  // Not by denying what the store would admit: the limit itself goes through.
  assert.ok(admitted >= LIMIT, `${kind} ${via}: only ${admitted} admitted of ${LIMIT}`)
}

for (const kind of ['redis', 'memcached'] as const) {
  describe(`${kind}: four processes on one hot key with the default options`, () => {
    let server: RedisProcess | MemcachedProcess
    let proxy: LinkProxy
    const workers = new Workers(WORKER)

    before(async () => {
      server = kind === 'redis' ? await startRedis() : await startMemcached()
      proxy = await startProxy(server.port, SLOW_LINK_MS)
    })

    after(async () => {
      workers.killAll()
      await proxy?.close()
      await server?.stop()
    })

    it('admit at most 1.1 × the limit beside two busy loops, directly and through a link slower than 100 ms', async (t) => {
      const loops = busyLoops(2)
      try {
        await hotKey(workers, kind, server.port, 'direct', t)
        await hotKey(workers, kind, portOf(proxy), `${2 * SLOW_LINK_MS}ms round-trip link`, t)
      } finally {
        stopAll(loops)
      }
    })
  })
}

describe('a Redis that stops answering (SIGSTOP), default options', () => {
  let server: RedisProcess
  let client: Redis
  let store: RedisStore

  before(async () => {
    server = await startRedis()
    client = new Redis(server.port, server.host)
    client.on('error', () => {})
    store = new RedisStore({ client })
  })

  after(async () => {
    server?.resume()
    await store?.close()
    client?.disconnect()
    await server?.stop()
  })

  /**
   * Runs `lanes` callers on `key` until `stop()`: each records every decision and how long it took.
   * Callers pace themselves by one turn of the event loop, so that decisions answered at once
   * (open's, the deny cache's) leave the timers their turn.
   */
  function callers(limiter: RateLimiter, key: string, lanes: number) {
    const decisions: { decision: Decision; ms: number; at: number }[] = []
    let running = true
    const done = Promise.all(
      Array.from({ length: lanes }, async () => {
        while (running) {
          const at = performance.now()
          const decision = await limiter.limit(key)
          decisions.push({ decision, ms: performance.now() - at, at })
          await new Promise((resolve) => setTimeout(resolve, 2))
        }
      }),
    )
    return {
      decisions,
      stop: async () => {
        running = false
        await done
      },
    }
  }

  async function until(what: string, condition: () => boolean): Promise<void> {
    // A state, not a time: the cap only keeps a broken run from hanging the suite.
    const cap = performance.now() + 60_000
    while (!condition()) {
      if (performance.now() > cap) throw new Error(`gave up waiting for ${what}`)
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
  }

  for (const sync of ['exact', 'lease'] as const) {
    const name = `${sync}: answers every caller within the timeout's maximum, admits at most limit + open's ceiling, then the store decides`
    it(name, async (t) => {
      const limit = 50
      const policy: PolicyOptions = { algorithm: 'sliding-window', limit, period: '1d' }
      if (sync === 'lease') Object.assign(policy, { sync: 'lease', leaseMs: '1s', leaseMax: 5 })
      const limiter = new RateLimiter({ store, policies: [policy] })
      const run = callers(limiter, `frozen:${sync}:${randomUUID()}`, 8)
      try {
        const fromStore = () => run.decisions.filter((d) => d.decision.source === 'store' || d.decision.source === 'lease').length
        await until('answers from the store', () => fromStore() >= 10)
        await server.pause()
        const pausedAt = performance.now()
        const fallbacks = () => run.decisions.filter((d) => d.at >= pausedAt && d.decision.source.startsWith('fallback')).length
        // Past the ceiling: the pause lasts until far more decisions than the limit were asked for.
        await until('fallback decisions', () => fallbacks() >= 3 * limit)
        server.resume()
        const resumedAt = performance.now()
        await until('the store deciding again', () =>
          run.decisions.some((d) => d.at > resumedAt && (d.decision.source === 'store' || d.decision.source === 'lease')),
        )
      } finally {
        server.resume()
        await run.stop()
        await limiter.close()
      }
      const admitted = run.decisions.filter((d) => d.decision.allowed).length
      const slowest = Math.max(...run.decisions.map((d) => d.ms))
      const bySource: Record<string, number> = {}
      for (const { decision } of run.decisions)
        bySource[`${decision.source}:${decision.allowed}`] = (bySource[`${decision.source}:${decision.allowed}`] ?? 0) + 1
      t.diagnostic(
        `${sync}: ${run.decisions.length} decisions, ${admitted} admitted, slowest ${Math.round(slowest)}ms; ${JSON.stringify(bySource)}`,
      )
      // The maximum plus generous slack for a loaded machine's timers; the point is "bounded", not "fast".
      assert.ok(slowest <= DEFAULT_TIMEOUT_MAX_MS + 2_000, `a caller waited ${Math.round(slowest)}ms`)
      // The store counted at most `limit`; open admitted at most its ceiling (limit / 1 instance) beside it.
      assert.ok(admitted <= 2 * limit, `${admitted} admitted, above the limit ${limit} plus open's ceiling ${limit}`)
    })
  }
})
