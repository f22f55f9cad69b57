// RedisStore: the Store on Redis (standalone, Sentinel or Cluster), one atomic script call per batch.

import { once } from 'node:events'
import { Cluster, Redis, type ClusterNode, type ClusterOptions, type RedisOptions } from 'ioredis'
import { FloodgateError } from '../../core/errors.js'
import type { Policy } from '../../core/policy.js'
import type { EvaluateRequest, EvaluateResponse, Store, SubmitCallback } from '../store.js'
import { decodeReply, encodeCall, type CallRequest } from './batch-codec.js'
import { TickBatcher } from './batcher.js'
import { ConnectionGate, unavailable } from './connection-gate.js'
import { policyKey, validatePrefix } from './keys.js'
import { Lane } from './lane.js'
import { runRunner } from './scripts.js'
import { keySlot } from './slot.js'

/**
 * How to reach Redis: give exactly one of `client`, `url`, `redis` or `cluster`.
 * A client you pass stays yours (`close()` leaves it open); one the store creates is closed by `close()`.
 */
export interface RedisStoreOptions {
  /**
   * An ioredis client: `new Redis(...)` (standalone, or Sentinel with `{ sentinels, name }`) or
   * `new Cluster(...)`. It must not have a `keyPrefix`: use `prefix`, because ioredis would prefix
   * only the keys a script declares, and on a Cluster the store declares only some of them.
   * Consider `autoResendUnfulfilledCommands: false` on it (the default for clients the store
   * creates), so a decision in flight when the connection drops is not applied again later.
   */
  client?: Redis | Cluster
  /** A `redis://` or `rediss://` URL; the store creates the client (with `redis` as extra options). */
  url?: string
  /** ioredis options for a client the store creates, e.g. `{ sentinels: [...], name: 'mymaster' }`. */
  redis?: RedisOptions
  /** Startup nodes of a Redis Cluster, e.g. `[{ host: '10.0.0.1', port: 7000 }]`; the store creates the `Cluster`. */
  cluster?: ClusterNode[]
  /** ioredis `Cluster` options for a cluster the store creates. */
  clusterOptions?: ClusterOptions
  /** Put before every key (default `fg:`), so several apps or environments can share one Redis. No braces. */
  prefix?: string
  /**
   * Most requests in one script call (default 512). Requests of one event-loop turn, and those that
   * wait behind a call in flight, are batched; a larger batch is split, so one call never blocks
   * Redis for long.
   */
  maxBatchSize?: number
}

interface Pending extends CallRequest {
  /** Called once: `(null, response)` or `(error)`. */
  readonly done: SubmitCallback
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
 * the state (and any block) as binary doubles (see runner.lua), and expiring when the state no
 * longer matters (padded to a coarse grid, so most writes keep the key's expiry). Records are read and written only by the script. A request's `now`
 * (tests) replaces the server clock for the decision; a `now` ahead of the server's also keeps
 * the record that much longer, so it never disappears before that clock says it expired.
 */
export class RedisStore implements Store {
  /** The ioredis client in use (created by the store or given to it). */
  readonly client: Redis | Cluster
  readonly prefix: string
  private readonly ownsClient: boolean
  private readonly maxBatchSize: number
  private readonly gate: ConnectionGate<Pending>
  private readonly batcher = new TickBatcher<Pending>((items) => this.gate.pass(items))
  // One per server (Cluster: per master; per slot while the slot map is unknown).
  private readonly lanes = new Map<string, Lane<Pending>>()
  // A lane's call: encoded as it goes, so that it holds everything that waited for it.
  private readonly startCall = (items: Pending[], done: () => void): void => {
    const call = this.prepare(items)
    if (call === undefined) return done()
    this.run(call, true, done)
  }
  // Calls sent and not answered yet, with their lane's `done`.
  private readonly inFlight = new Map<Call, () => void>()

  constructor(options: RedisStoreOptions) {
    if (options === null || typeof options !== 'object') {
      throw invalidOption('options', "expected an object like { client: new Redis() } or { url: 'redis://localhost:6379' }")
    }
    this.prefix = validatePrefix(options.prefix ?? 'fg:')
    this.maxBatchSize = validateBatchSize(options.maxBatchSize ?? 512)
    const { client, owned } = connect(options)
    rejectKeyPrefix(client)
    // Each failure already reaches the caller as a rejected call (which the limiter turns into its
    // failure mode); without a listener ioredis would also print every reconnect attempt.
    if (owned) client.on('error', ignoreConnectionError)
    this.client = client
    this.ownsClient = owned
    this.gate = new ConnectionGate(client, (items) => this.flush(items), (items, error) => {
      for (const item of items) answer(item, error)
    })
    if (!client.isCluster) client.on('close', this.onConnectionClosed)
  }

  /** Decides each request; requests of this event-loop turn share script calls with other callers'. */
  evaluate(batch: readonly EvaluateRequest[]): Promise<EvaluateResponse[]> {
    if (!Array.isArray(batch)) return Promise.reject(invalidRequest('batch must be an array of requests'))
    // A batch of one (the usual call): one promise instead of two and an array.
    if (batch.length === 1) {
      const problem = requestProblem(batch[0])
      if (problem !== undefined) return Promise.reject(invalidRequest(problem))
      return new Promise((resolve, reject) => this.queue(batch[0], (error, response) => (error === null ? resolve([response!]) : reject(error))))
    }
    return Promise.all(batch.map((request) => this.enqueue(request)))
  }

  /** Decides one request with this turn's others and calls `done(null, response)` or `done(error)`. */
  submit(request: EvaluateRequest, done: SubmitCallback): void {
    const problem = requestProblem(request)
    if (problem !== undefined) return done(invalidRequest(problem))
    this.queue(request, done)
  }

  /** Deletes the state (counters and blocks) of every given policy of `key`. */
  async reset(key: string, policies: readonly Policy[]): Promise<void> {
    if (typeof key !== 'string') throw invalidRequest(`key must be a string, got ${typeof key}`)
    if (policies.length === 0) return
    await this.client.del(...policies.map((policy) => policyKey(this.prefix, key, policy)))
  }

  /** Closes the client if the store created it; a client passed in is left to its owner. */
  async close(): Promise<void> {
    this.gate.detach()
    this.client.removeListener('close', this.onConnectionClosed)
    if (!this.ownsClient || this.client.status === 'end') return
    const ended = once(this.client, 'end')
    // QUIT lets replies in flight arrive first; a client that is not connected just drops its socket.
    if (this.client.status === 'ready') await this.client.quit().catch(() => this.client.disconnect())
    else this.client.disconnect()
    await ended
  }

  private enqueue(request: EvaluateRequest): Promise<EvaluateResponse> {
    const problem = requestProblem(request)
    if (problem !== undefined) return Promise.reject(invalidRequest(problem))
    return new Promise((resolve, reject) => this.queue(request, (error, response) => (error === null ? resolve(response!) : reject(error))))
  }

  // Queues a valid request for this turn's script call.
  private queue(request: EvaluateRequest, done: SubmitCallback): void {
    const keys = request.policies.map((policy) => policyKey(this.prefix, request.key, policy))
    const slot = this.client.isCluster ? keySlot(keys[0]) : -1
    this.batcher.add({ request, keys, slot, done })
  }

  private flush(items: Pending[]): void {
    for (const [server, group] of this.groupByServer(items)) {
      let lane = this.lanes.get(server)
      if (lane === undefined) {
        lane = new Lane(this.startCall, this.maxBatchSize)
        this.lanes.set(server, lane)
      }
      lane.submit(group)
    }
  }

  // Standalone/Sentinel: one group. Cluster: one group per master as the client last saw the slot
  // map (per slot while it has none yet).
  private groupByServer(items: Pending[]): Map<string, Pending[]> {
    if (!this.client.isCluster) return new Map([['', items]])
    const slots = (this.client as Cluster).slots
    return groupBy(items, (item) => slots[item.slot]?.[0] ?? `slot ${item.slot}`)
  }

  // Orders and encodes `items` for one call; undefined (each item rejected) if they cannot be encoded.
  private prepare(items: Pending[]): Call | undefined {
    const ordered = slotsTogether(items)
    const declared = ordered.filter((item) => item.slot === ordered[0].slot).length
    try {
      const { keys, args } = encodeCall(ordered, declared)
      return { items: ordered, declared, keys, args }
    } catch (error) {
      for (const item of ordered) answer(item, error)
      return undefined
    }
  }

  // Sends `call`; `done` runs as soon as the reply is in, before any caller is answered.
  private run(call: Call, mayRegroup: boolean, done: () => void): void {
    // A call that waited in its lane passed the connection gate before the connection dropped:
    // ioredis would keep it and apply it after reconnecting, long after its callers were answered.
    if (this.client.status !== 'ready') {
      done()
      this.failed(call, unavailable(this.client.status), false)
      return
    }
    this.inFlight.set(call, done)
    runRunner(this.client, call.keys, call.args).then(
      (reply) => {
        if (!this.inFlight.delete(call)) return
        done()
        this.answerAll(call, reply)
      },
      (error: unknown) => {
        if (!this.inFlight.delete(call)) return
        done()
        this.failed(call, error, mayRegroup)
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
  private readonly onConnectionClosed = (): void => {
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

  private failed(call: Call, error: unknown, mayRegroup: boolean): void {
    // The slot map changed under a multi-slot call: the script failed before writing anything,
    // so each slot is sent alone (declared keys only, which ioredis redirects by itself).
    if (mayRegroup && call.declared < call.items.length && isRoutingError(error)) {
      for (const group of groupBy(call.items, (item) => item.slot).values()) {
        const retry = this.prepare(group)
        if (retry !== undefined) this.run(retry, false, nothing)
      }
      return
    }
    for (const item of call.items) answer(item, error)
  }
}

function nothing(): void {}

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


/**
 * Defaults for clients the store creates: a script sent just before a connection dropped is not
 * sent again after reconnecting, because its caller has been answered by then (the script may or
 * may not have run; charging at most once is the safe side for a limiter).
 */
const NO_REPLAY: RedisOptions = { autoResendUnfulfilledCommands: false }

function connect(options: RedisStoreOptions): { client: Redis | Cluster; owned: boolean } {
  const given = (['client', 'url', 'cluster'] as const).filter((name) => options[name] !== undefined)
  if (given.length > 1) throw invalidOption(given.join(' and '), 'give only one of client, url or cluster')
  if (options.client !== undefined) {
    if (options.redis !== undefined || options.clusterOptions !== undefined) {
      throw invalidOption('client', 'redis and clusterOptions only apply to a client the store creates; configure your client instead')
    }
    if (!(options.client instanceof Redis) && !(options.client instanceof Cluster)) {
      throw invalidOption('client', 'expected an ioredis Redis or Cluster instance')
    }
    return { client: options.client, owned: false }
  }
  if (options.cluster !== undefined) {
    if (!Array.isArray(options.cluster) || options.cluster.length === 0) {
      throw invalidOption('cluster', "expected startup nodes like [{ host: '127.0.0.1', port: 7000 }]")
    }
    if (options.redis !== undefined) throw invalidOption('redis', "for a cluster, pass node options as clusterOptions.redisOptions")
    const clusterOptions = { ...options.clusterOptions, redisOptions: { ...NO_REPLAY, ...options.clusterOptions?.redisOptions } }
    return { client: new Cluster(options.cluster, clusterOptions), owned: true }
  }
  if (options.clusterOptions !== undefined) throw invalidOption('clusterOptions', 'only applies with cluster')
  if (options.url !== undefined) {
    if (typeof options.url !== 'string' || !/^rediss?:\/\//.test(options.url)) {
      throw invalidOption('url', `expected a redis:// or rediss:// URL, got ${JSON.stringify(options.url)}`)
    }
    return { client: new Redis(options.url, { ...NO_REPLAY, ...options.redis }), owned: true }
  }
  if (options.redis !== undefined) return { client: new Redis({ ...NO_REPLAY, ...options.redis }), owned: true }
  throw invalidOption('options', "give one of client, url, redis or cluster, e.g. { url: 'redis://localhost:6379' }")
}

function ignoreConnectionError(): void {}

function rejectKeyPrefix(client: Redis | Cluster): void {
  const keyPrefix = client instanceof Cluster ? client.options.keyPrefix ?? client.options.redisOptions?.keyPrefix : client.options.keyPrefix
  if (keyPrefix) {
    throw invalidOption('client', `the client has keyPrefix ${JSON.stringify(keyPrefix)}; remove it and pass { prefix } to RedisStore instead`)
  }
}

function validateBatchSize(size: unknown): number {
  if (typeof size !== 'number' || !Number.isInteger(size) || size < 1) {
    throw invalidOption('maxBatchSize', `must be a whole number of at least 1, got ${JSON.stringify(size)}`)
  }
  return size
}

function requestProblem(request: EvaluateRequest): string | undefined {
  if (request === null || typeof request !== 'object') return 'each request must be an object { key, policies, cost }'
  if (typeof request.key !== 'string') return `key must be a string, got ${typeof request.key}`
  if (!Array.isArray(request.policies) || request.policies.length === 0) return `key ${JSON.stringify(request.key)}: give at least one policy`
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
