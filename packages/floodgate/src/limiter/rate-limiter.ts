// The RateLimiter: the facade that checks each call, resolves its policy set to a decider, answers
// from the deny cache, and composes the guarded store, the fallback, the modes and the leases.

import { EventEmitter } from 'node:events'
import { FloodgateError } from '../core/errors.js'
import { MAX_COUNT, type Policy } from '../core/policy.js'
import { MemoryStore } from '../stores/memory/memory-store.js'
import type { Store } from '../stores/store.js'
import { createDecider, type Decider, type DeciderContext, type MaybeDecision } from './decider.js'
import { toNeverDecision } from './decisions.js'
import { Denials } from './deny-cache.js'
import { DirectPath } from './direct-path.js'
import { LocalBackend } from './fallback.js'
import { GuardedStore } from './guarded-store.js'
import { Leases } from './leases.js'
import { resolveOptions, type ResolvedOptions } from './options.js'
import { createPlan, planSignature, type PolicyPlan } from './policy-plan.js'
import { checkCost, checkKey, checkLease } from './requests.js'
import { readSyncState, type SyncState } from './sync-state.js'
import { WriteBack } from './sync/write-back.js'
import { LeaseBackend } from './sync/lease-backend.js'
import { createLeaseEngines, type LeaseEngines } from './sync/lease-engines.js'
import type { Decision, Lease, LimitOptions, RateLimiterEvents, RateLimiterOptions } from './types.js'

/**
 * Decides requests for keys: `await limiter.limit('user:42')`. Every policy of the set is decided
 * together, all-or-nothing. Emits 'store-error', 'breaker-open', 'breaker-close', 'fallback' and,
 * while something listens to it, 'decision'.
 *
 * Shadow and elastic policies are decided as `ExactDecider` describes; store calls are bounded as
 * `GuardedStore` describes; leases are kept by `Leases`.
 *
 * Deny cache: a store denial with a wait is remembered per (key, policy set, cost) and answered
 * in-process until the wait ends (see `Denials` for what is not remembered). refund/reset/release
 * clear the key's entry here; a refund made by another process is not seen before the wait ends
 * (the same trade as envoyproxy/ratelimit's local cache).
 */
export class RateLimiter extends EventEmitter<RateLimiterEvents> {
  readonly store: Store
  private readonly options: ResolvedOptions
  private readonly ownsStore: boolean
  private readonly clock: () => number
  private readonly remote: GuardedStore
  private readonly local: LocalBackend
  private readonly denials: Denials | undefined
  private readonly context: DeciderContext
  private readonly ownDecider: Decider | undefined
  // The own decider's one-step form, when its plan and store allow it (see DirectPath).
  private readonly direct: DirectPath | undefined
  private readonly deciders = new WeakMap<readonly Policy[], Decider>()
  // Deciders by content, for callers that pass an equal set in a new array each time (bounded).
  private readonly decidersBySignature = new Map<string, Decider>()
  private planCount = 0
  // Made by the first `sync: 'write-back'` policy set (see DeciderContext.writeBack).
  private writeBack: WriteBack | undefined
  // Made by the first `sync: 'lease'` or `'auto'` policy set (see DeciderContext.leaseEngines).
  private leaseEngines: LeaseEngines | undefined
  private readonly stopWatchingStore: (() => void) | undefined
  // Whether 'decision' has listeners, kept as a field so an unwatched call pays one boolean check.
  private observed = false

  constructor(options: RateLimiterOptions = {}) {
    super()
    this.options = resolveOptions(options)
    this.clock = this.options.clock
    this.ownsStore = this.options.store === undefined
    this.store = this.options.store ?? new MemoryStore({ clock: this.clock })
    this.remote = new GuardedStore(this.store, this.options, this)
    this.local = new LocalBackend(this.clock)
    this.denials = this.options.denyCacheMaxKeys > 0 ? new Denials(this.options.denyCacheMaxKeys, this.clock) : undefined
    this.context = {
      remote: this.remote,
      local: this.local,
      onStoreError: this.options.onStoreError,
      pool: this.options.pool,
      leases: new Leases(),
      denials: this.denials,
      events: this,
      writeBack: () => {
        this.writeBack ??= new WriteBack({
          store: this.store,
          instances: this.options.instances,
          maxKeys: this.options.syncMaxKeys,
          // Write-back's own waits keep to the adaptive timeout's minimum (its former default).
          timeoutMs: this.options.timeoutMinMs,
          clock: this.clock,
          timers: this.options.timers,
        })
        return this.writeBack
      },
      leaseEngines: () => {
        this.leaseEngines ??= createLeaseEngines(
          this.store,
          this.clock,
          this.options.timers,
          this.options.timeoutMinMs,
          this.options.syncMaxKeys,
        )
        return this.leaseEngines
      },
    }
    if (this.options.policies !== undefined) {
      this.ownDecider = createDecider(createPlan(this.options.policies, this.options.instances, '', this.clock()), this.context)
    }
    this.direct = DirectPath.of(this.ownDecider, this.remote, this.denials)
    this.stopWatchingStore = this.store.onRecovered?.((shard) => this.remote.recovered(shard ?? ''))
    // 'newListener' and 'removeListener' are EventEmitter's own events, outside RateLimiterEvents.
    const emitter = this as EventEmitter
    emitter.on('newListener', (event: string | symbol) => {
      if (event === 'decision') this.observed = true
    })
    emitter.on('removeListener', (event: string | symbol) => {
      if (event === 'decision') this.observed = this.listenerCount('decision') > 0
    })
  }

  /** The limiter's own validated policies (empty when every call passes its own). */
  get policies(): readonly Policy[] {
    return this.ownDecider?.plan.policies ?? []
  }

  /**
   * True when `limitSync` can answer for the limiter's own policies: the store answers in-process
   * (`Store.evaluateSync`, as the MemoryStore does) and any elastic policy's pool can too.
   */
  get canLimitSync(): boolean {
    return this.remote.synchronous && this.ownDecider?.whyNotSync() === undefined
  }

  /**
   * Decides one request for `key` and charges `cost` (default 1) if every policy admits it; cost 0
   * peeks. Rejects only for invalid arguments: store failures become the configured failure mode.
   */
  limit(key: string, options?: LimitOptions): Promise<Decision> {
    if (this.observed) return this.limitObserved(key, options)
    // The usual call (the own set, cost 1) on the direct path, past decideWith's checks that
    // cannot apply: the cost is one the set admits (DirectPath.admitsOne) and no denial is remembered.
    const direct = this.direct
    if (options === undefined && direct !== undefined && typeof key === 'string' && direct.admitsOne && this.noDenials()) {
      return settled(direct.decide(key, 1))
    }
    try {
      checkKey(key)
      const cost = options?.cost === undefined ? 1 : checkCost(options.cost, 0)
      return settled(this.decideWith(this.deciderFor(options?.policies), key, cost))
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /** limit() with its answer reported as a 'decision' event. */
  private limitObserved(key: string, options: LimitOptions | undefined): Promise<Decision> {
    const started = this.options.timers.now()
    return this.limitQuietly(key, options).then((decision) => {
      this.emit('decision', key, decision, options?.cost ?? 1, this.options.timers.now() - started)
      return decision
    })
  }

  // limit() without the event, for limitObserved; limit() runs the same lines itself, one call fewer
  // on the path every unobserved decision takes.
  private limitQuietly(key: string, options: LimitOptions | undefined): Promise<Decision> {
    try {
      checkKey(key)
      const cost = options?.cost === undefined ? 1 : checkCost(options.cost, 0)
      return settled(this.decideWith(this.deciderFor(options?.policies), key, cost))
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /**
   * `limit`, answered synchronously, for a store that decides in-process (the MemoryStore, or any
   * Store with `evaluateSync`). Throws a FloodgateError SYNC_UNSUPPORTED, before anything is
   * charged, when the store cannot answer synchronously (a RedisStore) or an elastic policy's pool
   * cannot; throws for invalid arguments as `limit` rejects.
   */
  limitSync(key: string, options?: LimitOptions): Decision {
    if (!this.observed) {
      // As in limit(): the usual call on the direct path, which always answers in-process.
      const direct = this.direct
      if (options === undefined && direct !== undefined && typeof key === 'string' && direct.admitsOne && this.noDenials()) {
        return synchronous(direct.decide(key, 1))
      }
      return this.limitSyncQuietly(key, options)
    }
    const started = this.options.timers.now()
    const decision = this.limitSyncQuietly(key, options)
    this.emit('decision', key, decision, options?.cost ?? 1, this.options.timers.now() - started)
    return decision
  }

  private limitSyncQuietly(key: string, options: LimitOptions | undefined): Decision {
    checkKey(key)
    const cost = options?.cost === undefined ? 1 : checkCost(options.cost, 0)
    const decider = this.deciderFor(options?.policies)
    const reason = decider.whyNotSync()
    if (reason !== undefined) throw new FloodgateError('SYNC_UNSUPPORTED', `limitSync: ${reason}`)
    return synchronous(this.decideWith(decider, key, cost))
  }

  /** The key's current state without charging it (a peek: `limit` with cost 0). */
  get(key: string, options?: Omit<LimitOptions, 'cost'>): Promise<Decision> {
    return this.limit(key, { policies: options?.policies, cost: 0 })
  }

  /**
   * Gives `cost` units back to `key` on every policy of the set (e.g. the request turned out not to
   * count). Store failures do not reject: they are reported with 'store-error' (and applied to the
   * local store in 'local' mode).
   */
  async refund(key: string, cost: number, options?: Omit<LimitOptions, 'cost'>): Promise<void> {
    checkKey(key)
    checkCost(cost, 1)
    const decider = this.deciderFor(options?.policies)
    this.denials?.forget(key, decider.plan)
    // No state holds more than MAX_COUNT units: a larger refund gives back all of them, and a store
    // gets a cost it can write (memcached's decr takes digits, not `1e+300`).
    await decider.refund(key, Math.min(cost, MAX_COUNT))
  }

  /** Forgets every counter and block of `key` for the set (in the store and the local fallback). */
  async reset(key: string, options?: Omit<LimitOptions, 'cost'>): Promise<void> {
    checkKey(key)
    const decider = this.deciderFor(options?.policies)
    this.denials?.forget(key, decider.plan)
    await decider.reset(key)
  }

  /**
   * Hands a concurrency lease back: its cost is refunded on its concurrency policies only. A second
   * release does nothing, nor does releasing a lease past its period: it has expired by itself, and
   * a refund would free a slot someone else holds now (the state does not know whose slot is whose).
   */
  async release(lease: Lease): Promise<void> {
    checkLease(lease)
    const origin = this.context.leases.originOf(lease, this.ownDecider?.plan, this.remote)
    if (origin.released) return
    origin.released = true
    this.denials?.forget(lease.key, origin.plan)
    const now = this.clock()
    const acquiredAt = lease.acquiredAt
    const live = acquiredAt === undefined ? origin.policies : origin.policies.filter((policy) => now < acquiredAt + policy.periodMs)
    // A lease-synced slot is freed in the held lease it came from, never in the store (see LeaseSync.release).
    if (origin.backend instanceof LeaseBackend) return live.length > 0 ? origin.backend.release(lease, origin.plan) : undefined
    if (live.length > 0) await origin.backend.call(lease.key, live, -lease.cost)
  }

  /**
   * Sends the units `sync: 'write-back'` policies admitted here and the store has not taken yet, and
   * waits for the answer (bounded by `timeout`); what fails stays for the next flush. Gives back the
   * leases `sync: 'lease'`/`'auto'` hold (their unused units); later decisions take new ones. A no-op
   * without such policies. Both happen by themselves (every `flushMs`; when a key goes quiet); this
   * is for a process about to pause, or a benchmark that counts them in its own time.
   */
  async flush(): Promise<void> {
    await this.writeBack?.flush()
    await this.leaseEngines?.leases.giveBackAll()
  }

  /**
   * What the sync modes hold now: write-back's keys and unflushed units, the leases held and their
   * units, with totals since start (docs/dashboard.md). A part is null while no policy set of its
   * mode is in use (the limiter's own, or one passed to a call). Read-only; the lease figures walk
   * the keys followed (at most their key cap).
   */
  syncState(): SyncState {
    return readSyncState(this.writeBack, this.leaseEngines)
  }

  /**
   * Flushes what write-back holds (one last try, bounded by `timeout`) and gives back every held
   * lease (their unused units return to the store), then closes the store if the
   * limiter created it, and the local fallback store. The service calls it on SIGTERM.
   */
  async close(): Promise<void> {
    this.stopWatchingStore?.()
    await this.writeBack?.close()
    await this.leaseEngines?.leases.close()
    await this.local.close()
    if (this.ownsStore) await this.store.close()
  }

  /**
   * Shared by limit and limitSync once the arguments are checked: the never-admitted cost, the deny
   * cache, then the decider.
   *
   * The one place where "admitted only if charged" holds for every store and every path (the
   * service's /v1/check, /json and gRPC come through here too). A cost above what the policies
   * could ever hold (`plan.maxCost`, at most 2^53 - 1 as createPolicy bounds every count) never
   * reaches a store: it is answered from a peek, denied with `never`. Any other cost is one every
   * store can count exactly, and a store answers `allowed` only with every policy charged (all or
   * nothing, core/evaluate.ts). A cost as a number needs no upper bound of its own: any integer
   * past 2^53 (a uint64 rounded) is above every maxCost.
   */
  private decideWith(decider: Decider, key: string, cost: number): MaybeDecision {
    const plan = decider.plan
    if (cost > plan.maxCost) return this.neverAdmitted(decider, key, cost)
    // Only a set of shadow policies alone (maxCost Infinity) gets here with such a cost. Stores take
    // safe integers only; 2^53 - 1 is denied as the real cost would be (by every policy short of
    // that bound) and the shadow answer is the same.
    if (cost > MAX_COUNT) cost = MAX_COUNT
    if (cost > 0 && this.denials !== undefined && this.denials.size > 0) {
      const denied = this.denials.lookup(key, plan, cost)
      if (denied !== undefined) {
        // Still demand: region sync moves split allotments by it (Store.noteDenied).
        this.store.noteDenied?.(key, plan.remote.policies, cost)
        return denied
      }
    }
    if (decider === this.ownDecider && this.direct !== undefined) return this.direct.decide(key, cost)
    // Read before the store decides, so a lease's expiry is never estimated later than the store's.
    return decider.decide(key, cost, plan.hasConcurrency ? this.clock() : 0)
  }

  /**
   * A cost above what some enforced policy of the set could ever admit is decided from the policies
   * alone (a property of policy and cost, the same for every algorithm): the key is only peeked, so
   * nothing is charged, no block period starts and no algorithm is asked for a wait that does not exist.
   */
  private neverAdmitted(decider: Decider, key: string, cost: number): MaybeDecision {
    const peeked = decider.decide(key, 0, 0)
    if (peeked instanceof Promise) return neverLater(decider.plan, peeked, cost)
    return toNeverDecision(decider.plan, peeked, cost)
  }

  // No denial remembered, so the deny cache cannot answer (decideWith's lookup would miss).
  private noDenials(): boolean {
    return this.denials === undefined || this.denials.size === 0
  }

  private deciderFor(policies: readonly Policy[] | undefined): Decider {
    if (policies === undefined) {
      if (this.ownDecider === undefined) {
        throw new FloodgateError(
          'INVALID_REQUEST',
          'policies: this limiter has no policies of its own; pass them to the constructor or to each call',
        )
      }
      return this.ownDecider
    }
    let decider = this.deciders.get(policies)
    if (decider === undefined) {
      if (!Array.isArray(policies) || policies.length === 0) {
        throw new FloodgateError('INVALID_REQUEST', 'policies: give at least one policy (validated with createPolicies)')
      }
      if (this.options.pool === undefined && policies.some((policy) => policy.mode === 'elastic')) {
        throw new FloodgateError('INVALID_OPTION', 'pool: elastic policies need a shared pool: pass pool: { limiter } to the RateLimiter')
      }
      const signature = planSignature(policies)
      decider = this.decidersBySignature.get(signature)
      if (decider === undefined) {
        // The tag keeps deny-cache entries of different sets for one key apart.
        const plan = createPlan(policies, this.options.instances, `\u0000${++this.planCount}\u0000`, this.clock())
        decider = createDecider(plan, this.context)
        this.decidersBySignature.set(signature, decider)
        if (this.decidersBySignature.size > MAX_PLANS) this.decidersBySignature.delete(this.decidersBySignature.keys().next().value!)
      }
      this.deciders.set(policies, decider)
    }
    return decider
  }
}

/** Most policy sets remembered by content; past it the oldest is forgotten (and rebuilt if it returns). */
const MAX_PLANS = 1_000

// Apart from neverAdmitted, so that its closure is made only on the asynchronous path.
function neverLater(plan: PolicyPlan, peeked: Promise<Decision>, cost: number): Promise<Decision> {
  return peeked.then((decision) => toNeverDecision(plan, decision, cost))
}

/** limitSync's answer, from a decider whose whyNotSync vouched for every step. */
function synchronous(decision: MaybeDecision): Decision {
  if (decision instanceof Promise) {
    // A promise here is a bug, and must not go unhandled.
    decision.catch(() => {})
    throw new Error('limitSync: a step answered asynchronously although the decider said it would not')
  }
  return decision
}

/**
 * The promise `limit` answers with. Promise.resolve searches an object for a `then` method (the
 * thenable check) unless the optimizing compiler knows the object's shape; the field read before
 * it tells the compiler, which then resolves the decision directly, about a tenth of an embedded
 * decision's time.
 */
function settled(decision: MaybeDecision): Promise<Decision> {
  if (decision instanceof Promise) return decision
  if (typeof decision.allowed !== 'boolean') throw new TypeError('a decision without `allowed`')
  return Promise.resolve(decision)
}
