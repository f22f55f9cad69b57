// Counters shared with a running envoyproxy/ratelimit: its key layout and its fixed-window counting, on its Redis or memcache.

import { createRequire } from 'node:module'
import {
  FloodgateError,
  type EvaluateRequest,
  type EvaluateResponse,
  type LeaseStore,
  type Policy,
  type Store,
  type SubmitCallback,
} from 'floodgate'
import { ENVOY_UNITS, envoyPolicyName, UNIT_MS } from 'floodgate/rules'
import type { CounterExpiry } from './compat-expiry.js'
import { COUNT_CEILING } from './envoy-counter.js'
import { connectionErrorReport, type RedisConnectOptions } from './redis-connection.js'
import { withSteadyTls } from './redis-tls-streams.js'

/** One descriptor entry as upstream joins it into a key. */
export interface KeyEntry {
  key: string
  value: string
}

/**
 * Upstream's cache key, as `GenerateCacheKey` in envoyproxy/ratelimit's src/limiter/cache_key.go
 * builds it: CACHE_KEY_PREFIX, the domain and `_`, then `key_value_` for each descriptor entry (a
 * `share_threshold` entry by its rule's pattern), then the window start in Unix seconds (the time
 * divided by the unit's seconds, times them: src/utils/utilities.go `UnitToDivider`). Nothing is
 * escaped, as upstream escapes nothing.
 */
export function upstreamCacheKey(prefix: string, domain: string, entries: readonly KeyEntry[], windowStartSeconds: number): string {
  let key = `${prefix}${domain}_`
  for (const entry of entries) key += `${entry.key}_${entry.value}_`
  return key + String(windowStartSeconds)
}

/**
 * The domain and entries of a rule's store key (`storeKeyOf` in floodgate/rules: `domain|key=value|…`,
 * with `\`, `|` and `=` escaped by a backslash); undefined for a key hashed for its length, which
 * keeps no text to share.
 */
export function parseStoreKey(storeKey: string): { domain: string; entries: KeyEntry[] } | undefined {
  if (storeKey.startsWith('sha256:')) return undefined
  const parts: string[][] = [[]]
  let text = ''
  for (let i = 0; i < storeKey.length; i++) {
    const char = storeKey[i]
    if (char === '\\') text += storeKey[++i] ?? ''
    else if (char === '|') {
      parts[parts.length - 1].push(text)
      parts.push([])
      text = ''
    } else if (char === '=' && parts.length > 1 && parts[parts.length - 1].length === 0) {
      parts[parts.length - 1].push(text)
      text = ''
    } else text += char
  }
  parts[parts.length - 1].push(text)
  const [[domain], ...rest] = parts
  if (rest.some((part) => part.length !== 2)) return undefined
  return { domain, entries: rest.map(([key, value]) => ({ key, value })) }
}

/** Where upstream-layout counters live: adds `hits` to `key` (0 reads it) and answers the count after. */
export interface UpstreamCounter {
  count(key: string, hits: number, unitSeconds: number): Promise<number>
  /** Whether a key can be kept at all (memcache: printable ASCII of at most 250 bytes). */
  accepts(key: string): boolean
  close(): Promise<void>
}

interface IoredisPipeline {
  incrby(key: string, n: number): IoredisPipeline
  expire(key: string, seconds: number): IoredisPipeline
  exec(): Promise<[Error | null, unknown][] | null>
}

/** An ioredis client (standalone, Sentinel or Cluster), as far as the counter uses it. */
export interface IoredisCounterClient {
  pipeline(): IoredisPipeline
  get(key: string): Promise<string | null>
  quit(): Promise<unknown>
}

/**
 * Upstream's Redis counting (src/redis/fixed_cache_impl.go): one pipeline of `INCRBY key hits` and
 * `EXPIRE key <unit seconds + jitter>` per descriptor, and `GET` to read; per-second keys on the separate
 * per-second Redis when there is one (REDIS_PERSECOND).
 */
export class RedisUpstreamCounter implements UpstreamCounter {
  constructor(
    private readonly client: IoredisCounterClient,
    private readonly perSecond?: IoredisCounterClient,
    private readonly expiry: CounterExpiry = (unitSeconds) => unitSeconds,
  ) {}

  accepts(): boolean {
    return true
  }

  async count(key: string, hits: number, unitSeconds: number): Promise<number> {
    const client = unitSeconds === 1 && this.perSecond !== undefined ? this.perSecond : this.client
    if (hits === 0) return Number((await client.get(key)) ?? 0)
    const replies = await client.pipeline().incrby(key, hits).expire(key, this.expiry(unitSeconds)).exec()
    const [error, count] = replies?.[0] ?? [new Error('no reply'), undefined]
    if (error !== null) throw error
    return Number(count)
  }

  async close(): Promise<void> {
    await Promise.all([this.client.quit(), this.perSecond?.quit()])
  }
}

/**
 * ioredis clients for upstream's Redis (and its per-second Redis), created with the app's ioredis;
 * `onError` hears each one's connection errors (a refused certificate, a missing socket).
 */
export function createUpstreamRedisCounter(
  main: RedisConnectOptions,
  perSecond: RedisConnectOptions | undefined,
  onError: (message: string, cause: string) => void = () => {},
  expiry?: CounterExpiry,
): RedisUpstreamCounter {
  const { Redis, Cluster } = createRequire(import.meta.url)('ioredis') as {
    Redis: new (...args: unknown[]) => IoredisCounterClient
    Cluster: new (...args: unknown[]) => IoredisCounterClient
  }
  // A command queued while disconnected would be applied after its caller was answered by the failure mode.
  const options = { enableOfflineQueue: false, autoResendUnfulfilledCommands: false, maxRetriesPerRequest: 1 }
  const create = (given: RedisConnectOptions, target: string) => {
    const report = connectionErrorReport(given, target, onError)
    const connect = withSteadyTls(given, report.heard)
    const client =
      connect.cluster !== undefined
        ? new Cluster(connect.cluster, {
            ...connect.clusterOptions,
            redisOptions: { ...options, ...connect.clusterOptions?.redisOptions },
            enableOfflineQueue: false,
          })
        : connect.url !== undefined
          ? new Redis(connect.url, { ...options, ...connect.redis })
          : new Redis({ ...options, ...connect.redis })
    report.watch(client as never)
    return client
  }
  return new RedisUpstreamCounter(
    create(main, "upstream's Redis"),
    perSecond === undefined ? undefined : create(perSecond, "upstream's per-second Redis"),
    expiry,
  )
}

/** Where one request's upstream-style counter is, and when. */
interface SharedCounter {
  key: string
  policy: Policy
  windowStart: number
  now: number
}

const UNIT_OF_PERIOD = new Map(ENVOY_UNITS.map((unit) => [UNIT_MS[unit], unit]))

/**
 * A Store that keeps the decider's upstream-style counters (rules in envoyproxy/ratelimit's format,
 * and Envoy overrides) under upstream's keys with upstream's counting, and passes everything else
 * (Floodgate's own `limits:` rules) to `inner`. A fleet half on upstream and half on Floodgate then
 * counts every hit in one counter per descriptor and window. Descriptors whose key was hashed for
 * its length, or that memcache cannot hold, keep Floodgate's own layout (they are not shared).
 */
export class EnvoyCompatStore implements Store {
  /**
   * Lease calls and write-back merges go to `inner` (with --region, the region sync's store): an
   * upstream-style counter is always decided per request (sync `always`), so none of them is one.
   */
  readonly lease: LeaseStore['lease'] | undefined
  readonly merge: Store['merge']

  constructor(
    readonly inner: Store,
    readonly counter: UpstreamCounter,
    private readonly prefix: string,
    private readonly clock: () => number = Date.now,
  ) {
    const leaser = (inner as Partial<LeaseStore>).lease
    this.lease = typeof leaser === 'function' ? (batch) => leaser.call(inner, batch) : undefined
    this.merge = typeof inner.merge === 'function' ? (batch) => inner.merge!(batch) : undefined
  }

  evaluate(batch: readonly EvaluateRequest[]): Promise<EvaluateResponse[]> {
    const upstream = batch.map((request) => this.upstreamKey(request))
    if (upstream.every((key) => key === undefined)) return this.inner.evaluate(batch)
    const own = batch.filter((_, i) => upstream[i] === undefined)
    const ownAnswers = own.length === 0 ? Promise.resolve([]) : this.inner.evaluate(own)
    const shared = batch.map((request, i) => (upstream[i] === undefined ? undefined : this.countShared(request, upstream[i])))
    return Promise.all([ownAnswers, Promise.all(shared)]).then(([ownResponses, sharedResponses]) => {
      let next = 0
      return sharedResponses.map((response) => response ?? ownResponses[next++])
    })
  }

  submit(request: EvaluateRequest, done: SubmitCallback): void {
    const key = this.upstreamKey(request)
    if (key === undefined && this.inner.submit !== undefined) return this.inner.submit(request, done)
    const answer = key === undefined ? this.inner.evaluate([request]).then(([response]) => response) : this.countShared(request, key)
    answer.then(
      (response) => done(null, response),
      (error: unknown) => done(error),
    )
  }

  // No shardOf: upstream-style counters are placed by upstream's rule, so this store is one shard.
  onRecovered(listener: (shard: string) => void): () => void {
    return this.inner.onRecovered?.(listener) ?? (() => {})
  }

  recover(shard: string): void {
    this.inner.recover?.(shard)
  }

  // Only `inner` learns demand from calls (split regions); an upstream-style counter never denies.
  noteDenied(key: string, policies: readonly Policy[], cost: number): void {
    this.inner.noteDenied?.(key, policies, cost)
  }

  reset(key: string, policies: readonly Policy[]): Promise<void> {
    return this.inner.reset(key, policies)
  }

  async close(): Promise<void> {
    await Promise.all([this.inner.close(), this.counter.close()])
  }

  // Upstream's key of a request for one upstream-style counter (the decider's never-denying
  // fixed window of a unit), or undefined for anything else.
  private upstreamKey(request: EvaluateRequest): SharedCounter | undefined {
    const policies = request.policies
    if (policies.length !== 1) return undefined
    const policy = policies[0]
    const unit = UNIT_OF_PERIOD.get(policy.periodMs)
    if (unit === undefined || policy.algorithm !== 'fixed-window' || policy.limit !== COUNT_CEILING) return undefined
    if (policy.name !== envoyPolicyName(unit)) return undefined
    const parsed = parseStoreKey(request.key)
    if (parsed === undefined) return undefined
    const now = request.now ?? this.clock()
    const windowStart = Math.floor(now / policy.periodMs) * policy.periodMs
    const key = upstreamCacheKey(this.prefix, parsed.domain, parsed.entries, windowStart / 1000)
    return this.counter.accepts(key) ? { key, policy, windowStart, now } : undefined
  }

  // Counts as upstream does and answers as the decider's counter policy would: allowed (it never
  // denies), with the count after the hits as what is used, and the window's end as the reset.
  private async countShared(request: EvaluateRequest, target: SharedCounter): Promise<EvaluateResponse> {
    if (request.deadline !== undefined && performance.now() > request.deadline) {
      throw new FloodgateError('STORE_TIMEOUT', 'the decision passed its deadline before it was sent; nothing was counted')
    }
    const { key, policy, windowStart, now } = target
    const count = await this.counter.count(key, request.cost, policy.periodMs / 1000)
    const resetMs = windowStart + policy.periodMs - now
    const result = { allowed: true, remaining: Math.max(0, policy.limit - count), resetMs, retryAfterMs: 0, delayMs: 0, blocked: false }
    return { allowed: true, results: [result], now }
  }
}
