// The lease manager: per key, admits from a block of units taken from the store, renewing, sizing and returning it.

import type { Policy } from '../../core/policy.js'
import type { EvaluateResponse, LeaseRequest, LeaseResponse, LeaseStore } from '../../stores/store.js'
import { Holding, newLeaseId, type Waiter } from './holding.js'
import type { LeaseCallback, LeaseStats, LeaseSyncOptions, SweepTimers } from './lease-sync-options.js'
import { policySetId } from './policy-set.js'

export type { LeaseCallback, LeaseSource, LeaseStats, LeaseSyncOptions, SweepTimers } from './lease-sync-options.js'

const NO_CANCEL = (): void => {}

/**
 * Decides from leases: a decision the held lease covers is answered in-process; otherwise one
 * store call ends the old lease (its unused units back) and takes a new one sized to this
 * instance's demand (Doorman's idea: demand × lease time, at most `leaseMax`, within the store's
 * fair share), answering everyone who waited for it. A key quiet for a quarter of its lease time,
 * or a lease about to expire, is given back by the sweep; `close()` gives back everything.
 *
 * During a store outage held leases keep serving until spent or expired; a lease's units are
 * never admitted after its expiry (measured from before the call that took it, so the store's
 * clock is never behind), and a return is applied once whatever is retried (core/lease.ts).
 */
export class LeaseSync {
  private readonly store: LeaseStore
  private readonly clock: () => number
  private readonly epochClock: () => number
  private readonly sweepMs: number
  private readonly maxKeys: number
  private readonly timers: SweepTimers
  private readonly giveBackTimeout: LeaseSyncOptions['giveBackTimeout']
  // Every holding, oldest first (eviction and the sweep walk it); found by policy set, then key.
  private readonly holdings = new Set<Holding>()
  private readonly bySet = new Map<string, Map<string, Holding>>()
  // The same maps by policy array, so a decision finds its holding with no text built per call.
  private readonly byArray = new WeakMap<readonly Policy[], Map<string, Holding>>()
  // The last array looked up and its map: a limiter asks for one set nearly always.
  private lastArray: readonly Policy[] | undefined
  private lastKeys: Map<string, Holding> | undefined
  // The holding found last, and the string it was asked by (`auto` asks in tryLocal and enqueue).
  private lastHolding: Holding | undefined
  private lastKey = ''
  private sweeper: unknown
  private closed = false
  // The in-process answer, rewritten by each synchronous decision (see Holding.respond). One for all
  // keys, not one per key: a decision then writes to memory the previous one left in the cache.
  private readonly scratch: EvaluateResponse = { allowed: true, results: [], now: 0 }
  // epochClock() − clock(), read again by every sweep and grant: an in-process answer stamps its
  // `now` from the clock read it decided at, not from a second clock read per decision.
  private epochOffset: number
  readonly stats: LeaseStats = { acquired: 0, returned: 0 }

  constructor(options: LeaseSyncOptions) {
    this.store = options.store
    this.clock = options.clock ?? (() => performance.now())
    this.epochClock = options.epochClock ?? Date.now
    this.sweepMs = options.sweepMs ?? 100
    this.maxKeys = options.maxKeys ?? 10_000
    this.timers = options.timers ?? (globalThis as unknown as SweepTimers)
    this.giveBackTimeout = options.giveBackTimeout
    this.epochOffset = this.epochClock() - this.clock()
  }

  /** Keys followed now (holding a lease, waiting, or recently used). */
  get size(): number {
    return this.holdings.size
  }

  /** Live leases held now, and the units left in them, over every key (walks the followed keys: at most `maxKeys`). */
  heldTotals(): { leases: number; units: number } {
    const now = this.clock()
    let leases = 0
    let units = 0
    for (const holding of this.holdings.values()) {
      if (!holding.isLive(now)) continue
      leases++
      units += holding.balance
    }
    return { leases, units }
  }

  /** Units this instance holds of `key` now (0 without a live lease). */
  held(key: string, policies: readonly Policy[]): number {
    const holding = this.keysOf(policies).get(key)
    return holding?.isLive(this.clock()) ? holding.balance : 0
  }

  /**
   * Decides `cost` for `key` under `policies` (all of them `lease`-synced, as the store runs them),
   * calling `done` once. Returns a function to call when the caller stops waiting (it timed out):
   * its units then stay in the lease for later decisions.
   */
  decide(key: string, policies: readonly Policy[], cost: number, done: LeaseCallback): () => void {
    const local = this.tryLocal(key, policies, cost)
    if (local !== undefined) {
      done(null, local, 'lease')
      return NO_CANCEL
    }
    return this.enqueue(key, policies, cost, done)
  }

  /**
   * The in-process part of `decide`: answers when the held lease covers `cost` (a refund or peek
   * while one is live), else undefined, and the caller goes on with `enqueue`. Counts the demand.
   * `now` is this engine's clock, read already by a caller that needed it (AutoSync).
   */
  tryLocal(key: string, policies: readonly Policy[], cost: number, now = this.clock()): EvaluateResponse | undefined {
    const holding = this.holding(key, policies, now)
    holding.lastUsed = now
    if (cost > 0) holding.add(cost, now)
    if (!holding.isLive(now)) return undefined
    if (cost <= 0) {
      // A refund goes back into the lease it most likely came from; a peek needs nothing.
      if (cost < 0) holding.balance = Math.min(holding.granted, holding.balance - cost)
      return holding.respond(now, this.epochOffset, this.scratch)
    }
    // Waiters come first; there are none unless a call is under way (`busy`, a field of the holding
    // itself, spares reading the waiting list on every decision).
    if (holding.balance < cost || (holding.busy && holding.waiting.length > 0)) return undefined
    holding.balance -= cost
    return holding.respond(now, this.epochOffset, this.scratch)
  }

  /**
   * The store part of `decide` (after `tryLocal` answered undefined): waits for the next store call,
   * which carries the first waiter's `deadline` (the store grants and charges nothing past it).
   */
  enqueue(key: string, policies: readonly Policy[], cost: number, done: LeaseCallback, deadline?: number): () => void {
    const holding = this.holding(key, policies, this.clock())
    const waiter: Waiter = { cost, done, deadline, cancelled: false }
    holding.waiting.push(waiter)
    if (!holding.busy) this.call(holding)
    return () => {
      waiter.cancelled = true
    }
  }

  /**
   * A concurrency slot admitted at `acquiredAt` (the epoch clock, read before deciding) is free
   * again: it serves the held lease again if it was admitted after that lease was granted (so from
   * it), else nothing: its slot belongs to an earlier lease and stays charged until that one ends.
   */
  release(key: string, policies: readonly Policy[], cost: number, acquiredAt: number): void {
    const holding = this.keysOf(policies).get(key)
    if (holding === undefined || !holding.isLive(this.clock()) || !(acquiredAt > holding.grantedAt)) return
    holding.balance = Math.min(holding.granted, holding.balance + cost)
  }

  /** Drops the lease held of `key` without giving it back (the key's state was reset in the store). */
  forget(key: string, policies: readonly Policy[]): void {
    const holding = this.keysOf(policies).get(key)
    if (holding !== undefined) holding.clear()
  }

  /** Gives back the lease held of `key` now, if any (a key `auto` found cooled). */
  drop(key: string, policies: readonly Policy[]): void {
    const holding = this.keysOf(policies).get(key)
    if (holding !== undefined && holding.id !== 0 && !holding.busy) void this.giveBack(holding)
  }

  /**
   * Gives back the leases of quiet keys; renews a lease about to expire when its key is still asked
   * for (its rest back and the next lease in one call, so the key's next decision is in-process
   * again), else gives it back; forgets keys quiet with nothing held.
   */
  sweep(): Promise<void> {
    const now = this.clock()
    this.epochOffset = this.epochClock() - now
    const returns: Promise<void>[] = []
    for (const holding of this.holdings) {
      if (holding.busy || holding.waiting.length > 0) continue
      const quiet = holding.isQuiet(now, this.sweepMs)
      if (holding.id !== 0 && !quiet && holding.expiresAt - now <= this.sweepMs && !this.closed) {
        const want = holding.wanted(now)
        if (want > 1) {
          this.renew(holding, want, now)
          continue
        }
      }
      if (holding.id !== 0 && (quiet || holding.expiresAt - now <= this.sweepMs)) returns.push(this.giveBack(holding))
      else if (holding.id === 0 && quiet) this.remove(holding)
    }
    return Promise.all(returns).then(() => undefined)
  }

  /**
   * Gives back every lease held now (their unused units return to the store); later decisions take
   * new ones. Waits for the store's answers at most `giveBackTimeout` when one is set.
   */
  async giveBackAll(): Promise<void> {
    const returns = Promise.all(
      [...this.holdings.values()].filter((holding) => holding.id !== 0 && !holding.busy).map((holding) => this.giveBack(holding)),
    )
    const bound = this.giveBackTimeout
    if (bound === undefined) return void (await returns)
    await new Promise<void>((resolve) => {
      returns.then(() => resolve())
      bound.setTimeout(resolve, bound.ms).unref?.()
    })
  }

  /** Starts the sweep timer (unref'd: it never keeps a process alive). */
  start(): void {
    if (this.sweeper !== undefined || this.closed) return
    this.sweeper = this.timers.setInterval(() => void this.sweep(), this.sweepMs)
    ;(this.sweeper as { unref?: () => void }).unref?.()
  }

  /** Stops the sweep and gives back every lease (the service calls it on SIGTERM). */
  async close(): Promise<void> {
    this.closed = true
    if (this.sweeper !== undefined) this.timers.clearInterval(this.sweeper)
    this.sweeper = undefined
    await this.giveBackAll()
    this.holdings.clear()
    this.bySet.clear()
    this.lastHolding = undefined
  }

  // The holdings of one policy set by key (equal sets share them, whatever the array).
  private keysOf(policies: readonly Policy[]): Map<string, Holding> {
    if (policies === this.lastArray) return this.lastKeys!
    let keys = this.byArray.get(policies)
    if (keys === undefined) {
      const id = policySetId(policies)
      keys = this.bySet.get(id)
      if (keys === undefined) {
        keys = new Map()
        this.bySet.set(id, keys)
      }
      this.byArray.set(policies, keys)
    }
    this.lastArray = policies
    this.lastKeys = keys
    return keys
  }

  private remove(holding: Holding): void {
    if (holding === this.lastHolding) this.lastHolding = undefined
    this.holdings.delete(holding)
    holding.keys.delete(holding.key)
  }

  /** The holding of `key` if it is followed (`auto` finds a hot key's heat from it), without following it. */
  find(key: string, policies: readonly Policy[]): Holding | undefined {
    const holding = this.keysOf(policies).get(key)
    if (holding !== undefined) this.remember(key, holding)
    return holding
  }

  /** The holding of `key`, following it from `now` if it is new. */
  holding(key: string, policies: readonly Policy[], now: number): Holding {
    const keys = this.keysOf(policies)
    const last = this.lastHolding
    if (last !== undefined && last.keys === keys && key === this.lastKey) return last
    let holding = keys.get(key)
    if (holding === undefined) {
      if (this.holdings.size >= this.maxKeys) this.evictOne()
      const leaseMs = Math.min(...policies.map((policy) => policy.leaseMs))
      holding = new Holding(key, keys, policies, leaseMs, Math.min(...policies.map((policy) => policy.leaseMax)), now)
      keys.set(key, holding)
      this.holdings.add(holding)
    }
    return this.remember(key, holding)
  }

  private remember(key: string, holding: Holding): Holding {
    this.lastHolding = holding
    this.lastKey = key
    return holding
  }

  // The oldest key goes (Map order is first use): its lease back, unless it is mid-call.
  private evictOne(): void {
    for (const holding of this.holdings) {
      if (holding.busy || holding.waiting.length > 0) continue
      if (holding.id !== 0) void this.giveBack(holding)
      this.remove(holding)
      return
    }
  }

  // One store call: ends the held lease (unused units back) and takes a new one for the first
  // waiter, sized to demand; then answers every waiter it covers, and calls again for the rest.
  private call(holding: Holding): void {
    const first = holding.waiting.find((waiter) => !waiter.cancelled)
    if (first === undefined) {
      holding.waiting.length = 0
      return
    }
    const now = this.clock()
    const need = first.cost
    const want = need > 0 ? Math.max(need, holding.wanted(now)) : 0
    // A lease no larger than the request in hand would only be taken to be returned: such a quiet
    // key is decided exactly instead (one store call, no ledger entry, nothing to give back).
    const keep = need > 0 && want > need && !this.closed
    const live = holding.isLive(now)
    const request: LeaseRequest = {
      key: holding.key,
      policies: holding.policies,
      id: keep ? newLeaseId() : 0,
      want: keep ? want : 0,
      need,
      leaseMs: holding.leaseMs,
      returnId: live ? holding.id : 0,
      returnUnused: live ? holding.balance : 0,
      deadline: first.deadline,
    }
    if (live) this.stats.returned++
    this.send(holding, request, now)
  }

  // One store call that ends the held lease (its rest back) and takes the next, with no request in hand.
  private renew(holding: Holding, want: number, now: number): void {
    this.send(holding, { ...this.ending(holding), id: newLeaseId(), want }, now)
  }

  // A request that ends `holding`'s lease, its unused units back, and takes nothing.
  private ending(holding: Holding): LeaseRequest {
    const { key, policies, leaseMs } = holding
    return { key, policies, id: 0, want: 0, need: 0, leaseMs, returnId: holding.id, returnUnused: holding.balance }
  }

  // Sends `request`, which ends the held lease: nothing more is admitted from it, whatever the answer.
  private send(holding: Holding, request: LeaseRequest, sentAt: number): void {
    holding.clear()
    holding.busy = true
    this.store.lease([request]).then(
      ([answer]) => this.granted(holding, request, answer, sentAt),
      (error: unknown) => {
        holding.busy = false
        const waiting = holding.waiting.splice(0)
        for (const waiter of waiting) if (!waiter.cancelled) waiter.done(error)
      },
    )
  }

  private granted(holding: Holding, request: LeaseRequest, answer: LeaseResponse, sentAt: number): void {
    const waiting = holding.waiting
    const first = waiting.find((waiter) => !waiter.cancelled)
    if (answer.granted > 0 && request.id !== 0) {
      this.stats.acquired++
      holding.id = request.id
      holding.granted = answer.granted
      holding.balance = answer.granted
      // From when the call was sent: the store's clock had not yet started the lease then.
      holding.expiresAt = sentAt + (answer.expiresAt - answer.now)
      holding.startedAt = sentAt
      holding.grantedAt = this.epochClock()
      this.epochOffset = holding.grantedAt - this.clock()
      holding.results = answer.results
    }
    const now = this.clock()
    if (this.closed && holding.id !== 0) void this.giveBack(holding)
    if (!answer.allowed) {
      // Denied: the key has not `need` units to spare; so is everyone asking as much or more (a
      // denied peek answers only itself).
      for (let i = 0; i < waiting.length; i++) {
        const waiter = waiting[i]
        if (waiter.cancelled || (request.need > 0 ? waiter.cost >= request.need : waiter === first)) {
          waiting.splice(i--, 1)
          if (!waiter.cancelled) waiter.done(null, { allowed: false, results: answer.results, now: answer.now }, 'store')
        }
      }
    } else if (request.id === 0 && first !== undefined) {
      // Decided exactly (a refund or peek without a lease, or after close).
      waiting.splice(waiting.indexOf(first), 1)
      first.done(null, { allowed: true, results: answer.results, now: answer.now }, 'store')
    }
    // Everyone the lease covers, in order; the first one's units were counted in the grant.
    while (waiting.length > 0 && holding.isLive(now)) {
      const waiter = waiting[0]
      if (waiter.cancelled) {
        waiting.shift()
        continue
      }
      if (waiter.cost > holding.balance) break
      waiting.shift()
      if (waiter.cost > 0) holding.balance -= waiter.cost
      else if (waiter.cost < 0) holding.balance = Math.min(holding.granted, holding.balance - waiter.cost)
      waiter.done(null, holding.respond(now, this.epochOffset), 'lease')
    }
    // Busy until then: a decision made from a waiter's callback queues behind the waiters left (and
    // tryLocal sees them), and the call below takes it.
    holding.busy = false
    if (waiting.length > 0) this.call(holding)
  }

  private giveBack(holding: Holding): Promise<void> {
    const request = this.ending(holding)
    this.stats.returned++
    holding.clear()
    // A failed return is no loss of safety: the units come back when the lease expires.
    return this.store.lease([request]).then(
      () => undefined,
      () => undefined,
    )
  }
}
