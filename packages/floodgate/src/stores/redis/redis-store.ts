// RedisStore: the Store on Redis (standalone, Sentinel or Cluster), one atomic script call per batch.

import { EventEmitter } from 'node:events'
import { FloodgateError } from '../../core/errors.js'
import type { Policy } from '../../core/policy.js'
import type {
  EvaluateRequest,
  EvaluateResponse,
  LeaseRequest,
  LeaseResponse,
  LeaseStore,
  MergeRequest,
  MergeResponse,
  SubmitCallback,
} from '../store.js'
import { decodeReply, encodeCall, pastDeadline, readServerClock, type CallRequest } from './batch-codec.js'
import { TickBatcher } from './batcher.js'
import { toConnection, type Connection, type RedisClientLike } from './connection.js'
import { ConnectionGate, unavailable } from './connection-gate.js'
import { createClient, type ClusterStartupNode } from './create-client.js'
import { escapeKeyPart, policyKey, validatePrefix } from './keys.js'
import { Lane } from './lane.js'
import { LeaseCaller, ledgerKey } from './lease-call.js'
import { mergeOnRedis } from './merge-calls.js'
import { Outage } from './outage.js'
import { ServerClock } from './server-clock.js'
import { runRunner } from './scripts.js'
import { keySlot } from './slot.js'

/**
 * How to reach Redis: give exactly one of `client`, `url`, `redis` or `cluster`.
 * A client you pass stays yours (`close()` leaves it open); one the store creates is closed by `close()`.
 * To create one, the store uses the app's ioredis if it is installed, else its node-redis (the
 * `redis` package); with neither it throws at construction.
 * A store that cannot reach Redis prints one process warning (FLOODGATE_REDIS_UNAVAILABLE) and
 * emits 'unavailable' for each outage and 'available' when Redis answers again (RedisStoreEvents).
 */
export interface RedisStoreOptions {
  /**
   * A client of your own, recognised by its methods (any installed copy works):
   * - ioredis 5 or 6: `new Redis(...)` (standalone, or Sentinel with `{ sentinels, name }`) or
   *   `new Cluster(...)`. Consider `autoResendUnfulfilledCommands: false` (the default for clients
   *   the store creates), so a decision in flight when the connection drops is not applied again later.
   * - node-redis (the `redis` package, version 5 or later): `createClient(...)` or
   *   `createCluster(...)`; the store connects it if you have not. Consider `disableOfflineQueue: true`.
   * It must not have a `keyPrefix`: use `prefix`, because a client would prefix only the keys a
   * script declares, and on a Cluster the store declares only some of them.
   */
  client?: RedisClientLike
  /** A `redis://` or `rediss://` URL; the store creates the client (with `redis` as extra options). */
  url?: string
  /**
   * Options for a client the store creates, passed to the library that creates it: ioredis
   * `RedisOptions` (e.g. `{ sentinels: [...], name: 'mymaster' }`) or node-redis `createClient` options.
   */
  redis?: object
  /** Startup nodes of a Redis Cluster, e.g. `[{ host: '10.0.0.1', port: 7000 }]`; the store creates the cluster client. */
  cluster?: readonly ClusterStartupNode[]
  /** ioredis `ClusterOptions` (or node-redis `createCluster` options) for a cluster the store creates. */
  clusterOptions?: object
  /** Put before every key (default `fg:`), so several apps or environments can share one Redis. No braces. */
  prefix?: string
  /**
   * Most requests in one script call (default 512). Requests of one event-loop turn, and those that
   * wait behind a call in flight, are batched; a larger batch is split, so one call never blocks
   * Redis for long.
   */
  maxBatchSize?: number
}

/** Events a RedisStore emits (besides what its limiter reports per decision). */
export interface RedisStoreEvents {
  /**
   * Redis cannot be reached: a connection attempt failed or the connection was lost (or, on a
   * Cluster, the limiter's breaker of a master opened). Emitted once per outage of a shard; the
   * first one of a store also prints a process warning (code FLOODGATE_REDIS_UNAVAILABLE).
   * Decisions of the shard's keys meanwhile fail, and the limiter answers them with its
   * `onStoreError` mode. `shard` is the Cluster master (`host:port`), or `''` for the whole store
   * (standalone, Sentinel, or a client that lost its connections), as `shardOf` names them.
   */
  unavailable: [error: Error, shard: string]
  /** `shard` may answer again after an outage: reconnected, answered, or a Cluster's slot map changed. */
  available: [shard: string]
}

interface Pending extends CallRequest {
  /** Called once: `(null, response)` or `(error)`. */
  readonly done: SubmitCallback
}

/** A merge waiting for the connection gate: sent, or refused. */
interface GatedMerge {
  run(): void
  refuse(error: Error): void
}

/** One script call, encoded: its requests in the order the script decides them. */
interface Call {
  readonly items: Pending[]
  /** How many of `items` (from the first) have their keys declared in KEYS: the routing slot's. */
  readonly declared: number
  readonly keys: string[]
  readonly args: string[]
}

/**
 * Keeps rate-limit state in Redis. Each `evaluate` request is queued; all requests queued in the
 * same event-loop turn are sent together as EVALSHA of the runner script per server (per Cluster
 * node), which decides them one after another atomically with the server's clock. Each server's
 * calls go through a Lane (lane.ts): one in flight, everything that comes meanwhile waiting to go as
 * one call when it answers, and a big batch for an idle lane split in two so that Redis and Node
 * work at the same time.
 *
 * Layout: one string per (key, policy), `fg:{<key>}:<policy>:<algorithm tag>` (see keys.ts), holding
 * the state (and any block) as binary doubles (see scripts/record.lua), and expiring when the state no
 * longer matters (padded to a coarse grid, so most writes keep the key's expiry). Records are read
 * and written only by the script. A request's `now` (tests) replaces the server clock for the
 * decision; a `now` ahead of the server's also keeps the record that much longer, so it never
 * disappears before that clock says it expired.
 *
 * Deadlines: a request's `deadline` (the moment its caller stops waiting, in `performance.now()`
 * terms) travels with its call as a time on that server's clock (server-clock.ts, one per lane:
 * Cluster nodes' clocks may disagree; a call uses the earliest of its requests' deadlines), and
 * the script charges nothing once the server's clock has passed it
 * (a call that waited out a paused or stopped server); its callers get STORE_TIMEOUT. A request
 * whose deadline passed before its call is sent (it waited for the first connection, or behind a
 * call in flight) is answered so and never sent. Until a lane has read a reply, it learns its
 * server's clock from a call that charges nothing before sending requests with deadlines.
 */
export class RedisStore extends EventEmitter<RedisStoreEvents> implements LeaseStore {
  /** The client in use (created by the store or given to it). */
  readonly client: RedisClientLike
  readonly prefix: string
  private readonly connection: Connection
  private readonly ownsClient: boolean
  private readonly maxBatchSize: number
  private readonly gate: ConnectionGate<Pending>
  // Merges pass the same gate as decisions (waiting for the first connection), on their own.
  private readonly mergeGate: ConnectionGate<GatedMerge>
  private readonly batcher = new TickBatcher<Pending>((items) => this.gate.pass(items))
  // One per server (Cluster: per master; per slot while the slot map is unknown).
  private readonly lanes = new Map<string, Lane<Pending>>()
  // Each server's clock as this process maps it (Cluster nodes' clocks may disagree), by lane.
  private readonly clocks = new Map<string, ServerClock>()
  // Calls sent and not answered yet, with their lane's `done`.
  private readonly inFlight = new Map<Call, () => void>()
  private readonly unsubscribe: (() => void)[] = []
  private readonly outage: Outage
  private readonly leases: LeaseCaller

  constructor(options: RedisStoreOptions) {
    super()
    if (options === null || typeof options !== 'object') {
      throw invalidOption('options', "expected an object like { client: new Redis() } or { url: 'redis://localhost:6379' }")
    }
    this.prefix = validatePrefix(options.prefix ?? 'fg:')
    this.maxBatchSize = validateBatchSize(options.maxBatchSize ?? 512)
    const { client, owned } = connect(options)
    const connection = toConnection(client)
    const keyPrefix = connection.keyPrefix()
    if (keyPrefix !== undefined) {
      if (owned) void connection.close().catch(nothing)
      throw invalidOption(
        'client',
        `the client has keyPrefix ${JSON.stringify(keyPrefix)}; remove it and pass { prefix } to RedisStore instead`,
      )
    }
    // Each failure already reaches the caller as a refused call (which the limiter turns into its
    // failure mode) and the store's 'unavailable' event; without a listener ioredis would print
    // every reconnection attempt, and node-redis would crash the process.
    if (owned) client.on('error', ignoreConnectionError)
    this.client = client
    this.connection = connection
    this.leases = new LeaseCaller(connection, this.prefix, this.maxBatchSize)
    this.ownsClient = owned
    this.gate = new ConnectionGate(
      connection,
      (items) => this.flush(items),
      (items, error) => {
        for (const item of items) answer(item, error)
      },
    )
    this.mergeGate = new ConnectionGate<GatedMerge>(
      connection,
      (items) => {
        for (const item of items) item.run()
      },
      (items, error) => {
        for (const item of items) item.refuse(error)
      },
    )
    this.outage = new Outage(connection, {
      unavailable: (error, shard) => this.emit('unavailable', error, shard),
      available: (shard) => this.emit('available', shard),
    })
    this.unsubscribe.push(
      connection.onDown(this.outage.connectionDown),
      connection.onReady(this.outage.connectionReady),
      // A new connection may reach another server (a Sentinel failover), with a clock of its own.
      connection.onReady(() => this.clocks.forEach((clock) => clock.forget())),
      connection.onLost(this.onConnectionLost),
    )
    // A client the store creates starts connecting now, so that a Redis out of reach is reported
    // at start, not at the first decision.
    if (owned && connection.isIdle()) connection.connect()
  }

  /** Whether the client is connected now (a Cluster client: reached its nodes), so calls are sent. */
  get connected(): boolean {
    return this.connection.isReady()
  }

  /** Decides each request; requests of this event-loop turn share script calls with other callers'. */
  evaluate(batch: readonly EvaluateRequest[]): Promise<EvaluateResponse[]> {
    if (!Array.isArray(batch)) return Promise.reject(invalidRequest('batch must be an array of requests'))
    // A batch of one (the usual call): one promise instead of two and an array.
    if (batch.length === 1) {
      const problem = requestProblem(batch[0])
      if (problem !== undefined) return Promise.reject(invalidRequest(problem))
      return new Promise((resolve, reject) =>
        this.queue(batch[0], (error, response) => (error === null ? resolve([response!]) : reject(error))),
      )
    }
    return Promise.all(batch.map((request) => this.enqueue(request)))
  }

  /** Decides one request with this turn's others and calls `done(null, response)` or `done(error)`. */
  submit(request: EvaluateRequest, done: SubmitCallback): void {
    const problem = requestProblem(request)
    if (problem !== undefined) return done(invalidRequest(problem))
    this.queue(request, done)
  }

  /**
   * Merges units into keys' records (see Store.merge): one merge-runner.lua call per server (per
   * Cluster master), of at most maxBatchSize requests each, on the server's clock.
   */
  merge(batch: readonly MergeRequest[]): Promise<MergeResponse[]> {
    return new Promise((resolve, reject) => {
      const run = (): void => {
        mergeOnRedis(this.connection, this.prefix, batch, this.maxBatchSize).then(resolve, reject)
      }
      this.mergeGate.pass([{ run, refuse: reject }])
    })
  }

  /** Runs lease calls (sync `lease`/`auto`): this turn's together, one script call per slot (lease-call.ts). */
  lease(batch: readonly LeaseRequest[]): Promise<LeaseResponse[]> {
    if (!Array.isArray(batch)) return Promise.reject(invalidRequest('batch must be an array of lease requests'))
    return this.leases.lease(batch)
  }

  /** Deletes the state (counters and blocks) of every given policy of `key`. */
  async reset(key: string, policies: readonly Policy[]): Promise<void> {
    if (typeof key !== 'string') throw invalidRequest(`key must be a string, got ${typeof key}`)
    if (policies.length === 0) return
    // The record, its lease ledger and its merge origins (`:wo`) go together.
    await this.connection.del(
      policies.flatMap((policy) => {
        const recordKey = policyKey(this.prefix, key, policy)
        return [recordKey, ledgerKey(this.prefix, key, policy), `${recordKey}:wo`]
      }),
    )
  }

  /**
   * The shard of `key`: on a Cluster, the master that serves its slot as the client last read the
   * slot map (`host:port`); `''` (the whole store) on a standalone or Sentinel Redis, or while the
   * map is unknown. After a failover the key's shard is the promoted replica, whose breaker starts
   * closed: the key goes back to the store as soon as the client knows the new master.
   */
  shardOf(key: string): string {
    if (!this.connection.isCluster) return ''
    // Every record of a key shares the hash tag {escaped key} (keys.ts), so this is their slot.
    return this.connection.masterOf(keySlot(`{${escapeKeyPart(key)}}`)) ?? ''
  }

  /** The shards that hold keys now: the Cluster's masters (`['']` elsewhere, or while the map is unknown). */
  shards(): string[] {
    if (!this.connection.isCluster) return ['']
    const masters = new Set<string>()
    for (let slot = 0; slot < 16384; slot++) masters.add(this.connection.masterOf(slot) ?? '')
    return [...masters]
  }

  /** Calls `listener` with the shard when Redis may answer again after failing (the 'available' event); returns its remover. */
  onRecovered(listener: (shard: string) => void): () => void {
    this.on('available', listener)
    return () => this.off('available', listener)
  }

  /**
   * The caller saw calls to `shard` fail while its breaker is open: a Cluster store reads its slot
   * map again until a replica has taken over, then emits 'available' (see outage.ts).
   */
  recover(shard = ''): void {
    this.outage.recover(shard)
  }

  /** Closes the client if the store created it; a client passed in is left to its owner. */
  async close(): Promise<void> {
    this.gate.detach()
    this.mergeGate.detach()
    this.leases.detach()
    this.outage.stop()
    for (const unsubscribe of this.unsubscribe.splice(0)) unsubscribe()
    if (this.ownsClient) await this.connection.close()
  }

  private enqueue(request: EvaluateRequest): Promise<EvaluateResponse> {
    const problem = requestProblem(request)
    if (problem !== undefined) return Promise.reject(invalidRequest(problem))
    return new Promise((resolve, reject) => this.queue(request, (error, response) => (error === null ? resolve(response!) : reject(error))))
  }

  // Queues a valid request for this turn's script call.
  private queue(request: EvaluateRequest, done: SubmitCallback): void {
    const keys = request.policies.map((policy) => policyKey(this.prefix, request.key, policy))
    const slot = this.connection.isCluster ? keySlot(keys[0]) : -1
    this.batcher.add({ request, keys, slot, done })
  }

  private flush(items: Pending[]): void {
    for (const [server, group] of this.groupByServer(items)) {
      let lane = this.lanes.get(server)
      if (lane === undefined) {
        const clock = new ServerClock()
        // A lane's call is encoded as it goes, so that it holds everything that waited for it.
        lane = new Lane((ready: Pending[], done: () => void) => this.send(ready, clock, done), this.maxBatchSize)
        this.lanes.set(server, lane)
        this.clocks.set(server, clock)
      }
      lane.submit(group)
    }
  }

  // Sends one call of a lane. Requests whose deadline passed while they waited (for the first
  // connection, or behind the lane's call in flight) are answered STORE_TIMEOUT, not sent: their
  // callers were answered otherwise already. Deadlines travel on the server's clock, so until it is
  // known a call that has any waits for `learnClock`.
  private send(items: Pending[], clock: ServerClock, done: () => void): void {
    const live = unexpired(items)
    if (live.length === 0) return done()
    if (!clock.known && live.some(hasDeadline)) return this.learnClock(live, clock, done)
    const call = this.prepare(live, clock)
    if (call === undefined) return done()
    this.run(call, clock, true, done)
  }

  // Learns the server's clock before sending `items`, from a call of one of them whose deadline (0)
  // has passed before it starts: the script answers its clock and reads and writes nothing. Sent
  // with no deadline instead, a first call to a server that hangs (SIGSTOP, a slow handshake) would
  // be charged when the server resumes, long after its callers were answered by their fallback.
  private learnClock(items: Pending[], clock: ServerClock, done: () => void): void {
    if (!this.connection.isReady()) {
      done()
      for (const item of items) answer(item, unavailable(this.connection.status()))
      return
    }
    const { keys, args } = encodeCall(items.slice(0, 1), 1, 0)
    // Kept in flight with every item, so that a connection lost meanwhile answers them (onConnectionLost).
    const probe: Call = { items, declared: 1, keys, args }
    this.inFlight.set(probe, done)
    runRunner(this.connection, keys, args).then(
      (reply) => {
        if (!this.inFlight.delete(probe)) return
        const serverNow = readServerClock(reply)
        if (serverNow === undefined) {
          done()
          this.answerAll(probe, reply) // not a reply of the script: decoding it fails every item
          return
        }
        clock.learn(serverNow, performance.now())
        this.send(items, clock, done)
      },
      (error: unknown) => {
        if (!this.inFlight.delete(probe)) return
        done()
        this.failed(probe, clock, error, false)
      },
    )
  }

  // Standalone/Sentinel: one group. Cluster: one group per master as the client last saw the slot
  // map (per slot while it has none yet).
  private groupByServer(items: Pending[]): Map<string, Pending[]> {
    if (!this.connection.isCluster) return new Map([['', items]])
    return groupBy(items, (item) => this.connection.masterOf(item.slot) ?? `slot ${item.slot}`)
  }

  // Orders and encodes `items` for one call; undefined (each item rejected) if they cannot be encoded.
  private prepare(items: Pending[], clock: ServerClock): Call | undefined {
    const ordered = slotsTogether(items)
    const declared = ordered.filter((item) => item.slot === ordered[0].slot).length
    try {
      const { keys, args } = encodeCall(ordered, declared, clock.earliest(ordered, deadlineOf))
      return { items: ordered, declared, keys, args }
    } catch (error) {
      for (const item of ordered) answer(item, error)
      return undefined
    }
  }

  // Sends `call`; `done` runs as soon as the reply is in, before any caller is answered.
  private run(call: Call, clock: ServerClock, mayRegroup: boolean, done: () => void): void {
    // A call that waited in its lane passed the connection gate before the connection dropped:
    // the client would keep it and apply it after reconnecting, long after its callers were answered.
    if (!this.connection.isReady()) {
      done()
      this.failed(call, clock, unavailable(this.connection.status()), false)
      return
    }
    this.inFlight.set(call, done)
    runRunner(this.connection, call.keys, call.args).then(
      (reply) => {
        if (!this.inFlight.delete(call)) return
        done()
        const serverNow = readServerClock(reply)
        if (serverNow !== undefined) clock.learn(serverNow, performance.now())
        this.outage.answered(this.connection.isCluster ? (this.connection.masterOf(call.items[0].slot) ?? '') : '')
        this.answerAll(call, reply)
      },
      (error: unknown) => {
        if (!this.inFlight.delete(call)) return
        done()
        this.failed(call, clock, error, mayRegroup)
      },
    )
  }

  /**
   * ioredis drops the commands in flight on a connection that closes, settling none of them, when
   * `autoResendUnfulfilledCommands` is off (the default for clients the store creates); with it on,
   * it applies them after reconnecting, when their callers have long been answered otherwise.
   * Either way their callers are answered now: the decision may or may not have been applied.
   * (A Cluster client fails over by itself; there the limiter's timeout answers such callers.)
   */
  private readonly onConnectionLost = (): void => {
    if (this.inFlight.size === 0) return
    const lost = [...this.inFlight]
    this.inFlight.clear()
    const error = new FloodgateError(
      'STORE_UNAVAILABLE',
      'the connection to Redis closed while this decision was in flight; it may or may not have been applied. ' +
        'Check that Redis is reachable; the limiter answers with its onStoreError mode meanwhile',
    )
    for (const [call, done] of lost) {
      done()
      for (const item of call.items) answer(item, error)
    }
  }

  private answerAll(call: Call, reply: unknown): void {
    let responses: EvaluateResponse[]
    try {
      responses = decodeReply(reply, call.items)
    } catch (error) {
      for (const item of call.items) answer(item, error)
      return
    }
    for (let i = 0; i < call.items.length; i++) answer(call.items[i], null, responses[i])
  }

  private failed(call: Call, clock: ServerClock, error: unknown, mayRegroup: boolean): void {
    // The slot map changed under a multi-slot call: the script failed before writing anything,
    // so each slot is sent alone (declared keys only, which the client redirects by itself).
    if (mayRegroup && call.declared < call.items.length && isRoutingError(error)) {
      for (const group of groupBy(call.items, (item) => item.slot).values()) {
        const retry = this.prepare(group, clock)
        if (retry !== undefined) this.run(retry, clock, false, nothing)
      }
      return
    }
    for (const item of call.items) answer(item, error)
  }
}

function nothing(): void {}

function deadlineOf(item: Pending): number | undefined {
  return item.request.deadline
}

function hasDeadline(item: Pending): boolean {
  return item.request.deadline !== undefined
}

// `items` but those whose deadline has passed, which are answered STORE_TIMEOUT. The limiter's
// timeout answers a caller once its deadline is reached, so such a call would charge what no caller
// was told about. The same array when none has passed (the usual case).
function unexpired(items: Pending[]): Pending[] {
  const now = performance.now()
  let live = items
  let error: FloodgateError | undefined
  for (let i = 0; i < items.length; i++) {
    const deadline = items[i].request.deadline
    if (deadline === undefined || deadline > now) {
      if (live !== items) live.push(items[i])
      continue
    }
    if (live === items) live = items.slice(0, i)
    error ??= pastDeadline('was about to be sent to Redis')
    answer(items[i], error)
  }
  return live
}

// Calls a request's callback. A callback that throws must not keep the rest of its call from their
// answers: its error is thrown again on its own, as an uncaught exception of the caller's.
function answer(item: Pending, error: unknown, response?: EvaluateResponse): void {
  try {
    item.done(error, response)
  } catch (thrown) {
    queueMicrotask(() => {
      throw thrown
    })
  }
}

function connect(options: RedisStoreOptions): { client: RedisClientLike; owned: boolean } {
  const given = (['client', 'url', 'cluster'] as const).filter((name) => options[name] !== undefined)
  if (given.length > 1) throw invalidOption(given.join(' and '), 'give only one of client, url or cluster')
  if (options.client !== undefined) {
    if (options.redis !== undefined || options.clusterOptions !== undefined) {
      throw invalidOption('client', 'redis and clusterOptions only apply to a client the store creates; configure your client instead')
    }
    return { client: options.client, owned: false }
  }
  if (options.redis !== undefined && (options.redis === null || typeof options.redis !== 'object')) {
    throw invalidOption('redis', 'expected an object of client options')
  }
  if (options.cluster !== undefined) {
    if (!Array.isArray(options.cluster) || options.cluster.length === 0) {
      throw invalidOption('cluster', "expected startup nodes like [{ host: '127.0.0.1', port: 7000 }]")
    }
    if (options.redis !== undefined) throw invalidOption('redis', 'for a cluster, pass node options as clusterOptions.redisOptions')
    return { client: createClient(options, 'cluster'), owned: true }
  }
  if (options.clusterOptions !== undefined) throw invalidOption('clusterOptions', 'only applies with cluster')
  if (options.url !== undefined) {
    if (typeof options.url !== 'string' || !/^rediss?:\/\//.test(options.url)) {
      throw invalidOption('url', `expected a redis:// or rediss:// URL, got ${JSON.stringify(options.url)}`)
    }
    return { client: createClient(options, 'url'), owned: true }
  }
  if (options.redis !== undefined) return { client: createClient(options, 'redis'), owned: true }
  throw invalidOption('options', "give one of client, url, redis or cluster, e.g. { url: 'redis://localhost:6379' }")
}

function ignoreConnectionError(): void {}

function validateBatchSize(size: unknown): number {
  if (typeof size !== 'number' || !Number.isInteger(size) || size < 1) {
    throw invalidOption('maxBatchSize', `must be a whole number of at least 1, got ${JSON.stringify(size)}`)
  }
  return size
}

function requestProblem(request: EvaluateRequest): string | undefined {
  if (request === null || typeof request !== 'object') return 'each request must be an object { key, policies, cost }'
  if (typeof request.key !== 'string') return `key must be a string, got ${typeof request.key}`
  if (!Array.isArray(request.policies) || request.policies.length === 0)
    return `key ${JSON.stringify(request.key)}: give at least one policy`
  if (typeof request.cost !== 'number' || !Number.isFinite(request.cost)) return `cost must be a finite number, got ${String(request.cost)}`
  if (request.now !== undefined && (typeof request.now !== 'number' || !Number.isFinite(request.now))) {
    return `now must be a finite number of milliseconds, got ${String(request.now)}`
  }
  return undefined
}

// Groups by key in first-seen order, keeping each group's items in their original order.
function groupBy<T, K>(items: readonly T[], keyOf: (item: T) => K): Map<K, T[]> {
  const groups = new Map<K, T[]>()
  for (const item of items) {
    const key = keyOf(item)
    const group = groups.get(key)
    if (group === undefined) groups.set(key, [item])
    else group.push(item)
  }
  return groups
}

// Each slot's requests next to each other (one read group each), the first item's slot first: it
// is the routing slot, whose keys are declared. Requests of one slot keep their order.
function slotsTogether(items: Pending[]): Pending[] {
  const slot = items[0].slot
  if (items.every((item) => item.slot === slot)) return items
  return [...groupBy(items, (item) => item.slot).values()].flat()
}

function isRoutingError(error: unknown): boolean {
  return error instanceof Error && /non local key|CROSSSLOT|same slot/.test(error.message)
}

function invalidOption(field: string, message: string): FloodgateError {
  return new FloodgateError('INVALID_OPTION', `RedisStore ${field}: ${message}`)
}

function invalidRequest(message: string): FloodgateError {
  return new FloodgateError('INVALID_REQUEST', message)
}
