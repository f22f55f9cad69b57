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
import { encodeCall, readServerClock } from './batch-codec.js'
import { TickBatcher } from './batcher.js'
import type { Connection, RedisClientLike } from './connection.js'
import { ConnectionGate, unavailable } from './connection-gate.js'
import { escapeKeyPart, policyKey, validatePrefix } from './keys.js'
import { Lane } from './lane.js'
import { LeaseCaller, ledgerKey } from './lease-call.js'
import { mergeOnRedis } from './merge-calls.js'
import { Outage } from './outage.js'
import type { Call, GatedMerge, Pending } from './pending-call.js'
import { answer, answerAll, groupBy, groupByServer, hasDeadline, isRoutingError, nothing, prepareCall } from './pending-call.js'
import { invalidRequest, requestProblem, unexpired } from './pending-call.js'
import { invalidOption, openClient, type RedisStoreEvents, type RedisStoreOptions, validateBatchSize } from './redis-store-options.js'
import { ServerClock } from './server-clock.js'
import { runRunner } from './scripts.js'
import { keySlot } from './slot.js'

export type { RedisStoreEvents, RedisStoreOptions } from './redis-store-options.js'

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
  /** The runner decides a key with live leases as the lease script does (scripts/leased-exact.lua). */
  readonly exactReadsLedgers = true
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
    const { client, connection, owned } = openClient(options)
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
    // The record and its lease ledger go together (and `:wo`, the merge origins an older version kept
    // beside a record). A merge token (merge-runner.lua) guards a slot's seqs, not a key: it stays,
    // so a resend of units merged before the reset still counts once.
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
    for (const [server, group] of groupByServer(this.connection, items)) {
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
    const call = prepareCall(live, clock)
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
          answerAll(probe, reply) // not a reply of the script: decoding it fails every item
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
        answerAll(call, reply)
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

  private failed(call: Call, clock: ServerClock, error: unknown, mayRegroup: boolean): void {
    // The slot map changed under a multi-slot call: the script failed before writing anything,
    // so each slot is sent alone (declared keys only, which the client redirects by itself).
    if (mayRegroup && call.declared < call.items.length && isRoutingError(error)) {
      for (const group of groupBy(call.items, (item) => item.slot).values()) {
        const retry = prepareCall(group, clock)
        if (retry !== undefined) this.run(retry, clock, false, nothing)
      }
      return
    }
    for (const item of call.items) answer(item, error)
  }
}
