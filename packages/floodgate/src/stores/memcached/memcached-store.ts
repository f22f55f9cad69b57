// MemcachedStore: the Store on one or more memcached servers (consistent hashing), counters by incr, other algorithms by gets/cas.

import { EventEmitter } from 'node:events'
import type { PolicyResult } from '../../core/evaluate.js'
import { FloodgateError } from '../../core/errors.js'
import type { Policy } from '../../core/policy.js'
import type { EvaluateRequest, EvaluateResponse, Store, SubmitCallback } from '../store.js'
import { createServerPool, parseServers } from './create-client.js'
import { memcachedPolicyKey, memcachedRoute, validateMemcachedPrefix } from './keys.js'
import { PolicyOps, timedOut, type CasStats, type PolicyCharge } from './policy-ops.js'
import { MemcachedOps, type MemjsClientLike } from './protocol.js'
import type { ServerList, ServerPool } from './server-pool.js'
import { ShardOutages, type MemcachedStoreEvents } from './shard-outages.js'
import { checkTlsOption, type MemcachedTlsOptions } from './tls-server.js'

/** How to reach memcached: give `servers` or `client`. */
export interface MemcachedStoreOptions {
  /**
   * Servers as `host:port` (an array, or one comma-separated string). The store creates a memjs
   * client (install `memjs`) and spreads keys over them by consistent hashing: a key is always on
   * the same server while the list is the same, and adding or removing one server moves only its
   * share of keys (those start afresh). Every record of one key is on the same server, and each
   * server is a shard: the limiter keeps a circuit breaker per server, so a dead server sends only
   * its own keys to the failure mode. `setServers` changes the list while the store runs.
   * `close()` closes the client.
   */
  servers?: readonly string[] | string
  /** Extra options for the memjs client the store creates (e.g. `{ timeout: 0.2 }`, in seconds). */
  memjs?: object
  /**
   * Reach the `servers` over TLS (memcached started with `-Z`): `tls.connect` options such as `ca`,
   * `cert` and `key` (a client certificate), `servername`; `checkServerIdentity: () => undefined`
   * verifies the chain but not the name. A refused handshake fails the server's requests with the
   * reason (STORE_UNAVAILABLE), as a server that does not answer. Servers added by `setServers` use it too.
   */
  tls?: MemcachedTlsOptions
  /**
   * A memjs `Client` of your own (`memjs.Client.create(...)`), recognised by its methods. It places
   * keys with its own `getServer` (memjs's default is a hash modulo the server count), so the store
   * cannot tell which server holds a key: it is one shard, with one breaker. It stays yours:
   * `close()` leaves it open.
   */
  client?: MemjsClientLike
  /** Put before every key (default `fg:`): printable ASCII, no spaces, `#` or `|`. */
  prefix?: string
  /**
   * How many times a read-modify-write policy (token bucket, GCRA, leaky bucket, sliding log,
   * concurrency) is tried again when another writer changed its record between `gets` and `cas`
   * (default 16). Past it the decision is refused (STORE_UNAVAILABLE) and the limiter answers with its
   * `onStoreError` mode: see docs/memcached.md on hot keys.
   */
  casRetries?: number
  /** Milliseconds since the epoch when a request carries no `now` (default `Date.now`). Memcached has no clock to read. */
  clock?: () => number
}

/**
 * Keeps rate-limit state in memcached. Memcached runs no scripts, so a request's policies are
 * charged one after another, in order; when one denies, those already charged are refunded and
 * the request is denied. No policy ever admits beyond its limit; while a denied request's charge
 * is being refunded, a concurrent request on the same key may see it and be denied too (a brief
 * over-count). See docs/memcached.md.
 *
 * Fixed and sliding windows are counters (`incr`, one per window); the other algorithms keep their
 * record (block deadline and state, as doubles) under one key, updated by `gets`/`cas`. The time is
 * the app's clock (or a request's `now`), so app servers' clocks must agree, as for envoyproxy/ratelimit.
 * A request's `deadline` is checked before each step: once it has passed, what was charged is
 * refunded and the request rejected with STORE_TIMEOUT.
 *
 * A server that does not answer is announced with 'unavailable' and, when it answers again,
 * 'available' (MemcachedStoreEvents), each naming the server.
 */
export class MemcachedStore extends EventEmitter<MemcachedStoreEvents> implements Store {
  readonly prefix: string
  /**
   * The server (`host:port`) that holds every record of `key` now; absent for a client of your own
   * (the store is then one shard). The limiter keeps a circuit breaker per server with it.
   */
  readonly shardOf: ((key: string) => string) | undefined
  /** The servers now, with `shardOf`. */
  readonly shards: (() => readonly string[]) | undefined
  private readonly outages = new ShardOutages(this)
  // A store made from `servers`: its lists, each with its memjs client and the steps run on it.
  private readonly pool: ServerPool<PolicyOps> | undefined
  // A store over a client of your own: that client, and the steps run on it.
  private readonly ownClient: MemjsClientLike | undefined
  private readonly ownOps: PolicyOps | undefined
  private readonly stats: CasStats = { retries: 0, exhausted: 0 }
  private readonly recoveredListeners = new Set<(shard: string) => void>()
  private readonly clock: () => number
  private closed = false

  constructor(options: MemcachedStoreOptions) {
    super()
    if (options === null || typeof options !== 'object') {
      throw invalidOption('options', "expected an object like { servers: ['127.0.0.1:11211'] }")
    }
    this.prefix = validateMemcachedPrefix(options.prefix ?? 'fg:')
    const casRetries = options.casRetries ?? 16
    if (typeof casRetries !== 'number' || !Number.isInteger(casRetries) || casRetries < 0 || casRetries > 1000) {
      throw invalidOption('casRetries', `must be a whole number from 0 to 1000, got ${JSON.stringify(casRetries)}`)
    }
    if (options.clock !== undefined && typeof options.clock !== 'function') {
      throw invalidOption('clock', 'must be a function returning milliseconds since the epoch')
    }
    if (options.memjs !== undefined && (options.memjs === null || typeof options.memjs !== 'object')) {
      throw invalidOption('memjs', 'expected an object of memjs client options')
    }
    if (options.client !== undefined) {
      if (options.servers !== undefined || options.memjs !== undefined || options.tls !== undefined) {
        throw invalidOption('client', 'give either client or servers (with memjs and tls options), not both')
      }
      if (!isMemjsClient(options.client)) {
        throw invalidOption('client', 'expected a memjs Client (memjs.Client.create(...)), with perform, incrSeq and getServer')
      }
      this.ownClient = options.client
      this.ownOps = new PolicyOps(new MemcachedOps(options.client), casRetries, this.stats)
      this.shardOf = undefined
      this.shards = undefined
    } else if (options.servers !== undefined) {
      const tls = checkTlsOption(options.tls)
      const pool = createServerPool(
        parseServers(options.servers),
        options.memjs,
        (client) => new PolicyOps(new MemcachedOps(client), casRetries, this.stats),
        tls,
      )
      const prefix = this.prefix
      this.pool = pool
      this.shardOf = (key) => pool.list.serverOfRoute(memcachedRoute(prefix, key))
      this.shards = () => pool.list.servers
    } else {
      throw invalidOption('options', "give servers (e.g. ['127.0.0.1:11211']) or client")
    }
    this.clock = options.clock ?? Date.now
  }

  /**
   * The memjs client in use: the one given, or the one the store made for its current server list
   * (after `setServers`, a new one; they share the connections of the servers both lists hold).
   */
  get client(): MemjsClientLike {
    return this.ownClient ?? (this.pool as ServerPool<PolicyOps>).list.client
  }

  /** Compare-and-swap contention since the store was created (the counters are live). */
  get casStats(): Readonly<CasStats> {
    return this.stats
  }

  /**
   * Replaces the servers of a store made from `servers` (checked as that option is: at least one,
   * `host:port`, no repeats). From the moment it returns, decisions go to the new list: a key stays
   * on its server unless a new server takes it over or its server left (consistent hashing: adding
   * one of n servers moves about 1/n of the keys, and those start afresh). Decisions already running
   * finish on the servers they began on, so none is lost or split between two servers; a removed
   * server's connection is closed when the last of them ends, and the promise resolves then. New
   * servers are connected on their first call. The limiter forgets the breakers of removed servers
   * (announced with `breaker-close` when open) and keeps a new breaker per new server. Emits
   * 'servers' with the new list. Rejects with INVALID_OPTION, changing nothing, for a bad list, for
   * a store over a memjs `client` of your own, and after `close()`. The same servers again (in any
   * order) change nothing.
   */
  setServers(servers: readonly string[] | string): Promise<void> {
    try {
      if (this.pool === undefined)
        throw invalidOption('setServers', 'a store over a memjs client of your own places keys with it; change its servers there')
      if (this.closed) throw invalidOption('setServers', 'the store is closed')
      const swap = this.pool.replace(parseServers(servers))
      if (swap === undefined) return Promise.resolve()
      this.outages.forget(this.pool.list.members)
      this.emit('servers', this.pool.list.servers)
      // The limiter's breakers: those of removed servers are retired, a probe goes to no live server.
      const shard = swap.removed[0] ?? swap.added[0]
      for (const listener of this.recoveredListeners) listener(shard)
      return swap.closed
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /**
   * Calls `listener` when the server list changed (`setServers`), with a server that left or joined:
   * the limiter then forgets the breakers of servers no longer listed. Returns its remover.
   */
  onRecovered(listener: (shard: string) => void): () => void {
    this.recoveredListeners.add(listener)
    return () => this.recoveredListeners.delete(listener)
  }

  /** Decides each request (concurrently; each request's policies in order). */
  evaluate(batch: readonly EvaluateRequest[]): Promise<EvaluateResponse[]> {
    if (!Array.isArray(batch)) return Promise.reject(invalidRequest('batch must be an array of requests'))
    return Promise.all(batch.map((request) => this.onList(request)))
  }

  /** Decides one request and calls `done(null, response)` or `done(error)`. */
  submit(request: EvaluateRequest, done: SubmitCallback): void {
    // The callbacks are onList's, inlined: one promise per decision fewer on the limiter's path.
    const list = this.pool?.enter()
    this.decide(request, list?.ops ?? (this.ownOps as PolicyOps)).then(
      (response) => {
        this.answered(list, request)
        done(null, response)
      },
      (error: unknown) => {
        this.failed(list, request, error)
        done(error)
      },
    )
  }

  /** Deletes the records and the current and previous windows' counters of every given policy of `key`. */
  async reset(key: string, policies: readonly Policy[]): Promise<void> {
    if (typeof key !== 'string') throw invalidRequest(`key must be a string, got ${typeof key}`)
    const now = this.clock()
    const list = this.pool?.enter()
    try {
      const ops = list?.ops ?? (this.ownOps as PolicyOps)
      const keys = policies.flatMap((policy) => {
        const base = memcachedPolicyKey(this.prefix, key, policy)
        if (policy.algorithm !== 'fixed-window' && policy.algorithm !== 'sliding-window') return [base]
        // Counted windows: this one's and the one before (a sliding window still weighs it).
        const previous = now - policy.periodMs
        return [base, ...ops.counterKeys(base, policy, now), ...ops.counterKeys(base, policy, previous)]
      })
      await Promise.all([...new Set(keys)].map((k) => ops.ops.delete(k)))
    } finally {
      if (list !== undefined) this.pool?.leave(list)
    }
  }

  /** Closes the connections if the store made them; a client passed in is left to its owner. */
  close(): Promise<void> {
    this.closed = true
    this.pool?.close()
    return Promise.resolve()
  }

  /**
   * Decides `request` on the current server list, kept until the decision ends, and tells the
   * outages which server answered or failed: the one the decision went to, even when the list
   * changed meanwhile (a server that left is no longer followed).
   */
  private onList(request: EvaluateRequest): Promise<EvaluateResponse> {
    const list = this.pool?.enter()
    return this.decide(request, list?.ops ?? (this.ownOps as PolicyOps)).then(
      (response) => {
        this.answered(list, request)
        return response
      },
      (error: unknown) => {
        this.failed(list, request, error)
        throw error
      },
    )
  }

  // An answer ends its server's outage; the shard is worked out only while some outage is on.
  private answered(list: ServerList<PolicyOps> | undefined, request: EvaluateRequest): void {
    if (list !== undefined) this.pool?.leave(list)
    if (this.outages.any) this.outages.answered(this.shardOn(list, request.key))
  }

  private failed(list: ServerList<PolicyOps> | undefined, request: EvaluateRequest, error: unknown): void {
    if (list !== undefined) this.pool?.leave(list)
    if (typeof request?.key !== 'string') return
    const shard = this.shardOn(list, request.key)
    if (list === undefined || this.pool?.list.members.has(shard)) this.outages.failed(shard, error)
  }

  private shardOn(list: ServerList<PolicyOps> | undefined, key: string): string {
    return list === undefined ? '' : list.serverOfRoute(memcachedRoute(this.prefix, key))
  }

  private async decide(request: EvaluateRequest, policyOps: PolicyOps): Promise<EvaluateResponse> {
    const problem = requestProblem(request)
    if (problem !== undefined) throw invalidRequest(problem)
    const { key, policies, cost, deadline } = request
    const now = request.now ?? this.clock()
    if (deadline !== undefined && performance.now() > deadline) throw timedOut()
    const keys = policies.map((policy) => memcachedPolicyKey(this.prefix, key, policy))
    if (cost <= 0) {
      // A peek or a refund changes nothing that another policy's answer depends on: all at once.
      const charges = await Promise.all(policies.map((policy, i) => policyOps.apply(keys[i], policy, cost, now, deadline)))
      const results = charges.map((charge) => charge.result)
      return { allowed: results.every((result) => result.allowed), results, now }
    }
    const results: PolicyResult[] = new Array(policies.length)
    const charged: PolicyCharge[] = []
    let denied = -1
    for (let i = 0; i < policies.length; i++) {
      let charge: PolicyCharge
      try {
        if (i > 0 && deadline !== undefined && performance.now() > deadline) throw timedOut()
        charge = await policyOps.apply(keys[i], policies[i], cost, now, deadline)
      } catch (error) {
        await refund(charged)
        throw error
      }
      results[i] = charge.result
      if (!charge.result.allowed) {
        denied = i
        break
      }
      charged.push(charge)
    }
    if (denied < 0) {
      // Every policy charged, but the caller stopped waiting meanwhile: it was answered otherwise.
      if (deadline !== undefined && performance.now() > deadline) {
        await refund(charged)
        throw timedOut()
      }
      return { allowed: true, results, now }
    }
    await refund(charged)
    // The others' answers as evaluateKey gives them: the charged ones re-read with a peek, the ones
    // after the denial judged for this cost (a denial among them starts its block period too).
    const peeks = await Promise.all(
      policies.map((policy, i) => {
        if (i < denied) return policyOps.apply(keys[i], policy, 0, now, undefined)
        return i > denied ? policyOps.judge(keys[i], policy, cost, now) : undefined
      }),
    )
    for (let i = 0; i < policies.length; i++) {
      const peek = peeks[i]
      if (peek !== undefined) results[i] = peek.result
    }
    return { allowed: false, results, now }
  }
}

/**
 * Takes back what a denied or abandoned request charged, newest first. A refund that fails (the
 * server went away) leaves its units counted until the window or state expires: an over-count,
 * never an over-admission.
 */
async function refund(charged: readonly PolicyCharge[]): Promise<void> {
  for (let i = charged.length - 1; i >= 0; i--) {
    const undo = charged[i].undo
    if (undo !== undefined) await undo().catch(nothing)
  }
}

function nothing(): void {}

function isMemjsClient(client: unknown): client is MemjsClientLike {
  const c = client as Partial<MemjsClientLike> | null
  if (c === null || typeof c !== 'object') return false
  return typeof c.perform === 'function' && typeof c.incrSeq === 'function' && typeof c.getServer === 'function'
}

function requestProblem(request: EvaluateRequest): string | undefined {
  if (request === null || typeof request !== 'object') return 'each request must be an object { key, policies, cost }'
  if (typeof request.key !== 'string') return `key must be a string, got ${typeof request.key}`
  if (!Array.isArray(request.policies) || request.policies.length === 0) {
    return `key ${JSON.stringify(request.key)}: give at least one policy`
  }
  // Memcached counts whole units (`incr`), so every algorithm here takes whole costs, as the limiter sends them.
  if (typeof request.cost !== 'number' || !Number.isSafeInteger(request.cost)) {
    return `cost must be a whole number, got ${String(request.cost)}`
  }
  if (request.now !== undefined && (typeof request.now !== 'number' || !Number.isFinite(request.now))) {
    return `now must be a finite number of milliseconds, got ${String(request.now)}`
  }
  return undefined
}

function invalidOption(field: string, message: string): FloodgateError {
  return new FloodgateError('INVALID_OPTION', `MemcachedStore ${field}: ${message}`)
}

function invalidRequest(message: string): FloodgateError {
  return new FloodgateError('INVALID_REQUEST', message)
}
