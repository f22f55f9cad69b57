// The write-back rows of `npm run bench:redis`: a RateLimiter with sync: 'write-back' on 10k keys and on
// one hot key, run in the same interleaved rounds as the exact mode and the peers, then its
// over-admission on one hot key across four instances measured beside the bound of docs/sync.md.

import type { Redis } from 'ioredis'
import { RateLimiter, type Decision } from '../packages/floodgate/src/index.js'
import { RedisStore } from '../packages/floodgate/src/redis.js'
import type { PolicyOptions } from '../packages/floodgate/src/core/policy.js'
import type { MergeRequest, Store } from '../packages/floodgate/src/stores/store.js'
import { formatCount, printTable, type Contender, type CountedOp } from './support.js'
import { hammerHotKey, StoreTally, syncContender, type SyncInstance } from './sync-rows.js'

/** What the main bench hands this section: its shape of load and its client factory. */
export interface WriteBackBenchContext {
  callers: number
  keys: number
  roundMs: number
  maxOpsPerRound: number
  limit: number
  periodS: number
  newClient: () => Redis
  /** Called with each instance's close, which the main bench runs at its end. */
  onClose: (close: () => Promise<void>) => void
  /** An op for runLoad that counts its calls, denials and failures under `name` (the main bench's tally). */
  counted: <T>(name: string, op: (i: number) => Promise<T>, isDenied: (answer: T) => boolean) => CountedOp<T>
  /** Where the sync rows put what their stores were asked, for the floor table (printSyncFloor). */
  storeTallies: { name: string; tally: StoreTally }[]
}

export const WRITE_BACK_10K = 'write-back gcra, 10k keys'
export const WRITE_BACK_10K_SLOW = 'write-back gcra, 10k keys, flushMs 1s'
export const WRITE_BACK_HOT = 'write-back gcra, 1 hot key'
/** The rows of this mode in the main bench's summary. */
export const WRITE_BACK_ROWS = [WRITE_BACK_10K, WRITE_BACK_10K_SLOW, WRITE_BACK_HOT]

/**
 * One instance: a RateLimiter with its own client and RedisStore (and so its own write-back copies
 * and origin), deciding `policy`; `onCall` hears the duration of every store call (flushes and reads).
 */
function instance(
  context: WriteBackBenchContext,
  policy: PolicyOptions,
  instances = 1,
  onCall: (ms: number) => void = () => {},
  tally?: StoreTally,
): SyncInstance & { flush: () => Promise<void> } {
  const redisStore = new RedisStore({ client: context.newClient() })
  const store: Store = {
    merge(batch: readonly MergeRequest[]) {
      if (tally !== undefined) {
        tally.requests += batch.length
        // A flush carries units (with this instance's origin); a call of reads only is a key's first read.
        if (batch.some((request) => request.origin !== undefined)) tally.calls++
      }
      const started = performance.now()
      return redisStore.merge(batch).finally(() => onCall(performance.now() - started))
    },
    evaluate: (batch) => redisStore.evaluate(batch),
    reset: (key, set) => redisStore.reset(key, set),
    close: () => redisStore.close(),
  }
  // The timeout is generous so that a busy machine measures throughput, not fallbacks.
  const limiter = new RateLimiter({ store, policies: [policy], instances, timeout: '5s' })
  context.onClose(async () => {
    await limiter.close()
    await redisStore.close()
  })
  const flush = async (): Promise<void> => {
    // Twice: the units, then the keys read since (each flush carries what the previous one left).
    await limiter.flush()
    await limiter.flush()
  }
  const denied = (decision: Decision): boolean => {
    // A decision write-back did not make (a refused key, a fallback) would flatter the row.
    if (decision.source !== 'write-back') throw new Error(`decision came from ${decision.source}`)
    return !decision.allowed
  }
  return { limit: (key) => limiter.limit(key), denied, decide: async (key) => !denied(await limiter.limit(key)), flush }
}

/**
 * The write-back contenders: the same load as the exact rows (every request admitted), on a working
 * set of 10k keys with the default flush (50 ms) and with flushMs 1 s, and on one key. The 10k-key rows
 * measure keys in use: each round is preceded by WARM_MS of the same load, outside the measurement
 * (the interleaved rounds leave every key idle for the other contenders' rounds in between).
 */
export function writeBackContenders(context: WriteBackBenchContext): Contender[] {
  // The exact gcra row's policy (live state between a key's visits, see benchPolicy in redis.ts).
  const policy: PolicyOptions = { algorithm: 'gcra', limit: 1_000, burst: context.limit, period: `${context.periodS}s`, sync: 'write-back' }
  const contender = (name: string, keyOf: (i: number) => string, flushMs?: number, warm = false): Contender => {
    const tally = new StoreTally(true)
    context.storeTallies.push({ name, tally })
    const row = instance(context, flushMs === undefined ? policy : { ...policy, flushMs }, 1, undefined, tally)
    return syncContender(context, name, keyOf, row, row.flush, warm, row.flush, tally)
  }
  return [
    contender(WRITE_BACK_10K, (i) => `wb:${(i * 7919) % context.keys}`, undefined, true),
    contender(WRITE_BACK_10K_SLOW, (i) => `wb-slow:${(i * 7919) % context.keys}`, 1000, true),
    contender(WRITE_BACK_HOT, () => 'wb-hot'),
  ]
}

/**
 * Over-admission on one hot key: four write-back instances in this process (each its own client,
 * copies and origin, so they know of each other only through Redis), 64 callers each, against a GCRA
 * policy the load saturates. What the policy allows in the run is burst + rate × duration; the rest is
 * over-admission, printed beside the bound N × cost + rate × (flushMs + 2 × the slowest store call) + rate × flushMs
 * (docs/sync.md) and beside instances × rate × flushMs (the yardstick).
 */
export async function printWriteBackOverAdmission(context: WriteBackBenchContext, durationMs: number): Promise<void> {
  const rows: string[][] = []
  for (const flushMs of [20, 50, 100]) {
    const instances = 4
    const rate = 20_000 // per second
    const burst = 2_000
    const policy: PolicyOptions = { algorithm: 'gcra', limit: rate, burst, period: '1s', sync: 'write-back', flushMs }
    let slowestCallMs = 0
    const onCall = (ms: number): void => {
      slowestCallMs = Math.max(slowestCallMs, ms)
    }
    const fleet = Array.from({ length: instances }, () => instance(context, policy, instances, onCall))
    const key = `wb-over-${flushMs}-${Date.now()}`
    const started = performance.now()
    const { decisions, admitted } = await hammerHotKey(
      fleet.map(({ decide }) => decide),
      key,
      durationMs,
    )
    const elapsedMs = performance.now() - started
    const allowed = burst + (rate * elapsedMs) / 1000
    // The last term: the provisional units of a key's first decisions, before its read answers.
    const bound = instances * 1 + (rate * (flushMs + 2 * slowestCallMs)) / 1000 + (rate * flushMs) / 1000
    rows.push([
      `${flushMs} ms`,
      formatCount(decisions),
      formatCount(admitted),
      formatCount(allowed),
      `${Math.round((100 * admitted) / allowed)}%`,
      formatCount(Math.max(0, admitted - allowed)),
      formatCount(bound),
      `${slowestCallMs.toFixed(1)} ms`,
      formatCount((instances * rate * flushMs) / 1000),
    ])
  }
  printTable(
    ['flushMs', 'decisions', 'admitted', 'policy allows', 'admitted/allows', 'over', 'bound', 'slowest call', 'N × rate × flushMs'],
    rows,
    `Write-back over-admission: 4 instances × 64 callers on one hot key, gcra 20,000/s burst 2,000, ${durationMs} ms each\n` +
      '(policy allows = burst + rate × duration; bound = N × cost + rate × (flushMs + 2 × slowest store call) + rate × flushMs,\n' +
      'the last term for the provisional units before a new key is read, docs/sync.md)',
  )
}
