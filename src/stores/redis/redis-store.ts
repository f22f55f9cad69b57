// RedisStore: the Store on Redis (standalone, Sentinel or Cluster), one atomic script call per batch.

import { once } from 'node:events'
import { Cluster, Redis, type ClusterNode, type ClusterOptions, type RedisOptions } from 'ioredis'
import { FloodgateError } from '../../core/errors.js'
import type { Policy } from '../../core/policy.js'
import type { EvaluateRequest, EvaluateResponse, Store } from '../store.js'
import { decodeReply, encodeCall, type CallRequest } from './batch-codec.js'
import { TickBatcher } from './batcher.js'
import { ConnectionGate } from './connection-gate.js'
import { policyKey, validatePrefix } from './keys.js'
import { runRunner, scriptClient } from './scripts.js'
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
   * Most requests in one script call (default 512). Requests of one event-loop turn are batched;
   * a larger batch is split, so one call never blocks Redis for long.
   */
  maxBatchSize?: number
}

interface Pending extends CallRequest {
  resolve(response: EvaluateResponse): void
  reject(error: unknown): void
}

/**
 * Keeps rate-limit state in Redis. Each `evaluate` request is queued; all requests queued in the
 * same event-loop turn are sent together as one EVALSHA of the runner script per server (per
 * Cluster node), which decides them one after another atomically with the server's clock.
 *
 * Layout: one string per (key, policy), `fg:{<key>}:<policy>:<algorithm tag>` (see keys.ts), holding
 * the state (and any block) as binary doubles (see runner.lua), and expiring (PX) when the state no
 * longer matters. Records are read and written only by the script. A request's `now`
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
      for (const item of items) item.reject(error)
    })
  }

  /** Decides each request; requests of this event-loop turn share script calls with other callers'. */
  evaluate(batch: readonly EvaluateRequest[]): Promise<EvaluateResponse[]> {
    if (!Array.isArray(batch)) return Promise.reject(invalidRequest('batch must be an array of requests'))
    // The common call (the limiter's) holds one request: one promise instead of two and an array.
    if (batch.length === 1) {
      const problem = requestProblem(batch[0])
      if (problem !== undefined) return Promise.reject(invalidRequest(problem))
      return new Promise((resolve, reject) => this.queue(batch[0], (response) => resolve([response]), reject))
    }
    return Promise.all(batch.map((request) => this.enqueue(request)))
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
    return new Promise((resolve, reject) => this.queue(request, resolve, reject))
  }

  // Queues a valid request for this turn's script call.
  private queue(request: EvaluateRequest, resolve: (response: EvaluateResponse) => void, reject: (error: unknown) => void): void {
    const keys = request.policies.map((policy) => policyKey(this.prefix, request.key, policy))
    const slot = this.client.isCluster ? keySlot(keys[0]) : -1
    this.batcher.add({ request, keys, slot, resolve, reject })
  }

  private flush(items: Pending[]): void {
    for (const group of this.groupByServer(items)) {
      for (let start = 0; start < group.length; start += this.maxBatchSize) {
        void this.send(group.slice(start, start + this.maxBatchSize), true)
      }
    }
  }

  // Standalone/Sentinel: one group. Cluster: one group per master as the client last saw the slot
  // map (per slot while it has none yet).
  private groupByServer(items: Pending[]): Pending[][] {
    if (!this.client.isCluster) return [items]
    const slots = (this.client as Cluster).slots
    return groupBy(items, (item) => slots[item.slot]?.[0] ?? `slot ${item.slot}`)
  }

  private async send(items: Pending[], mayRegroup: boolean): Promise<void> {
    const ordered = slotsTogether(items)
    const declared = ordered.filter((item) => item.slot === ordered[0].slot).length
    let responses: EvaluateResponse[]
    try {
      const { keys, args } = encodeCall(ordered, declared)
      responses = decodeReply(await runRunner(scriptClient(this.client), keys, args), ordered)
    } catch (error) {
      // The slot map changed under a multi-slot call: the script failed before writing anything,
      // so each slot is sent alone (declared keys only, which ioredis redirects by itself).
      if (mayRegroup && declared < ordered.length && isRoutingError(error)) {
        await Promise.all(groupBy(ordered, (item) => item.slot).map((group) => this.send(group, false)))
        return
      }
      for (const item of ordered) item.reject(error)
      return
    }
    for (let i = 0; i < ordered.length; i++) ordered[i].resolve(responses[i])
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

// Groups in first-seen order, keeping each group's items in their original order.
function groupBy<T, K>(items: readonly T[], keyOf: (item: T) => K): T[][] {
  const groups = new Map<K, T[]>()
  for (const item of items) {
    const key = keyOf(item)
    const group = groups.get(key)
    if (group === undefined) groups.set(key, [item])
    else group.push(item)
  }
  return [...groups.values()]
}

// Each slot's requests next to each other (one read group each), the first item's slot first: it
// is the routing slot, whose keys are declared. Requests of one slot keep their order.
function slotsTogether(items: Pending[]): Pending[] {
  const slot = items[0].slot
  if (items.every((item) => item.slot === slot)) return items
  return groupBy(items, (item) => item.slot).flat()
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
