// Demand that moves between split regions under real timers: a redis-server per region, 50 ms proxies, the
// sync loop on its own timers. Shared by test/regions/demand-move.test.ts and bench/regions.ts.
//
// One run: region `from` (us) has demand for a second (and has answered it), then the clients move
// to `to` (ap). The run records every decision's answer in every region, so "never over the limit"
// is checked over the whole history, and how long after the move the regions together first
// admitted 90% of the limit, in wall ms and in the sync ticks the receiving region ran meanwhile
// (what a loaded machine stretches).

import { performance } from 'node:perf_hooks'
import { RateLimiter } from '../../src/limiter/rate-limiter.js'
import type { PolicyOptions } from '../../src/core/policy.js'
import { RedisStore } from '../../src/stores/redis/redis-store.js'
import { RegionSync } from '../../src/regions/region-sync.js'
import { startRedis, type RedisProcess } from '../support/redis-server.js'
import { startProxy, type LinkProxy } from './support.js'

/** How the demand arrives: `burst`, all of `from`'s 1500 at once and then clumps of 150 every 100 ms at `to`; `steady`, 600/s evenly. */
export type DemandShape = 'burst' | 'steady'

export interface MoveCase {
  regions: 2 | 3
  denyCache: boolean
  shape: DemandShape
}

export interface MoveResult {
  readonly name: string
  readonly limit: number
  /** Admitted by every region before the move, and by the end of the run. */
  readonly before: number
  readonly admitted: number
  /** Decisions asked of the regions after the move. */
  readonly askedAfter: number
  /** Wall ms from the move until the regions together had admitted 90% of the limit (undefined: never in the run). */
  readonly reachedMs: number | undefined
  /** Ticks the receiving region ran from the move until then (its sync intervals as they really passed). */
  readonly reachedTicks: number | undefined
  readonly intervalMs: number
}

export const LIMIT = 1000
const PERIOD_MS = 600_000
const FROM = 'us'
const TO = 'ap'
const BEFORE_MS = 1_000

export function caseName(c: MoveCase): string {
  return `${c.regions} regions, ${c.shape}, deny cache ${c.denyCache ? 'on' : 'off'}`
}

/** Redis servers for three regions and a 50 ms proxy for every link, reused by every run. */
export class MoveBed {
  private runs = 0

  private constructor(
    private readonly servers: Record<string, RedisProcess>,
    private readonly proxies: Record<string, Record<string, LinkProxy>>,
  ) {}

  static async start(latencyMs = 50): Promise<MoveBed> {
    const names = ['ap', 'eu', 'us']
    const started = await Promise.all(names.map(() => startRedis()))
    const servers = Object.fromEntries(names.map((name, i) => [name, started[i]]))
    const proxies: Record<string, Record<string, LinkProxy>> = {}
    for (const from of names) {
      proxies[from] = {}
      for (const to of names) if (to !== from) proxies[from][to] = await startProxy(servers[to].port, latencyMs)
    }
    return new MoveBed(servers, proxies)
  }

  /**
   * Runs one case: `from` has demand for a second, then `to` has it until 90% of the limit is
   * admitted and `settleMs` more, or `maxAfterMs` after the move. Keys and asks are under a
   * prefix of their own, so runs never see each other's state.
   */
  async run(c: MoveCase, options: { intervalMs?: number; maxAfterMs?: number; settleMs?: number } = {}): Promise<MoveResult> {
    const intervalMs = options.intervalMs ?? 100
    const maxAfterMs = options.maxAfterMs ?? 4_000
    const settleMs = options.settleMs ?? 300
    const names = c.regions === 2 ? ['ap', 'us'] : ['ap', 'eu', 'us']
    const prefix = `fg:move${++this.runs}:`
    // Windows follow the clock: start the run a second into a fresh 10-minute window, whatever the wall time.
    const offset = Math.ceil(Date.now() / PERIOD_MS) * PERIOD_MS + 1_000 - Date.now()
    const clock = () => Date.now() + offset
    const policy: PolicyOptions = { name: 'moving', algorithm: 'fixed-window', limit: LIMIT, period: PERIOD_MS, regions: 'split' }
    const regions = names.map((name) => {
      const store = new RedisStore({ url: this.servers[name].url, prefix })
      const peers = Object.fromEntries(names.filter((peer) => peer !== name).map((peer) => [peer, this.proxies[name][peer].url]))
      const sync = new RegionSync({ region: name, local: store, peers, interval: intervalMs, clock })
      const limiter = new RateLimiter({
        store: sync.store,
        policies: [policy],
        clock,
        timeout: '5s',
        ...(c.denyCache ? {} : { denyCache: false }),
      })
      return { name, store, sync, limiter }
    })
    const byName = (name: string) => regions.find((region) => region.name === name)!
    try {
      await connected(regions.map((region) => region.sync))
      // A cold store answers its first burst late (scripts loaded, connections warmed): not what is measured.
      await Promise.all(regions.map((region) => Promise.all(Array.from({ length: 1500 }, () => region.limiter.limit('warm-up')))))
      const key = 'moving-key'
      let admitted = 0
      let askedAfter = 0
      let movedAt = Infinity
      let ticksAtMove = 0
      let reachedMs: number | undefined
      let reachedTicks: number | undefined
      const pending = new Set<Promise<unknown>>()
      // Decisions of the first phase not answered yet: the move waits for them, so that what the
      // run measures starts from the state the first phase left, even on a slow machine.
      const first = new Set<Promise<unknown>>()
      const receiver = byName(TO).sync
      const ask = (limiter: RateLimiter, after: boolean) => {
        if (after) askedAfter++
        const decision = limiter.limit(key).then((d) => {
          if (!d.allowed) return
          admitted++
          if (reachedMs === undefined && admitted >= 0.9 * LIMIT && performance.now() >= movedAt) {
            reachedMs = performance.now() - movedAt
            reachedTicks = receiver.status().counters.ticks - ticksAtMove
          }
        })
        pending.add(decision)
        if (!after) first.add(decision)
        void decision.finally(() => {
          pending.delete(decision)
          first.delete(decision)
        })
      }
      const start = performance.now()
      const from = byName(FROM).limiter
      const to = byName(TO).limiter
      let sent = 0
      let before = 0
      // What is due by `elapsed` ms of a phase: timers run late on a busy machine, and a late tick
      // sends what was due meanwhile, so the demand stays what the shape says.
      const due = (elapsed: number, first: boolean) =>
        c.shape === 'steady' ? Math.floor(0.6 * elapsed) : first ? 1500 : 150 * (Math.floor(elapsed / 100) + 1)
      await new Promise<void>((resolve) => {
        const timer = setInterval(() => {
          const now = performance.now()
          if (now < start + BEFORE_MS) {
            for (const n = due(now - start, true); sent < n; sent++) ask(from, false)
            return
          }
          if (movedAt === Infinity && first.size > 0) return
          if (movedAt === Infinity) {
            before = admitted
            movedAt = now
            ticksAtMove = receiver.status().counters.ticks
            sent = 0
          }
          const after = now - movedAt
          const done = reachedMs !== undefined ? after >= reachedMs + settleMs : after >= maxAfterMs
          if (done) {
            clearInterval(timer)
            resolve()
            return
          }
          for (const n = due(after, false); sent < n; sent++) ask(to, true)
        }, 10)
      })
      while (pending.size > 0) await Promise.all([...pending])
      return { name: caseName(c), limit: LIMIT, before, admitted, askedAfter, reachedMs, reachedTicks, intervalMs }
    } finally {
      for (const region of regions) {
        await region.sync.close()
        await region.limiter.close()
        await region.store.close()
      }
    }
  }

  async stop(): Promise<void> {
    for (const links of Object.values(this.proxies)) for (const proxy of Object.values(links)) await proxy.close()
    await Promise.all(Object.values(this.servers).map((server) => server.stop()))
  }
}

// Waits until every region has exchanged with every peer (the links connect in the background).
async function connected(syncs: readonly RegionSync[]): Promise<void> {
  for (let i = 0; i < 400; i++) {
    if (syncs.every((sync) => sync.status().peers.every((peer) => peer.connected))) return
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
  throw new Error('the regions did not connect to each other')
}
