// The lease rows of `npm run bench:redis`: a RateLimiter with sync: 'lease' on 10k keys and on one hot
// key, run in the same interleaved rounds as the exact mode and the peers; then, on one saturated hot
// key across four instances, what leases admit beside what the policy allows (never more; the gap is
// the under-admission, printed beside its bound from docs/sync.md).

import { RateLimiter, type Decision } from '../packages/floodgate/src/index.js'
import { RedisStore } from '../packages/floodgate/src/redis.js'
import type { PolicyOptions } from '../packages/floodgate/src/core/policy.js'
import { formatCount, printTable, type Contender } from './support.js'
import { hammerHotKey, StoreTally, syncContender, type SyncInstance } from './sync-rows.js'
import type { WriteBackBenchContext } from './write-back.js'

/** The same context as the write-back rows: the main bench's load shape, clients and tallies. */
export type LeaseBenchContext = WriteBackBenchContext

export const LEASE_10K = 'lease gcra, 10k keys'
export const LEASE_10K_LONG = 'lease gcra, 10k keys, leaseMs 10s'
export const LEASE_HOT = 'lease gcra, 1 hot key'
/** The rows of this mode in the main bench's summary. */
export const LEASE_ROWS = [LEASE_10K, LEASE_10K_LONG, LEASE_HOT]

/** One instance: a RateLimiter with its own client and RedisStore (so its own leases). */
function instance(context: LeaseBenchContext, policy: PolicyOptions, denyCache = true): (key: string) => Promise<boolean> {
  return instanceWithLimiter(context, policy, denyCache).decide
}

function instanceWithLimiter(
  context: LeaseBenchContext,
  policy: PolicyOptions,
  denyCache = true,
  tally?: StoreTally,
): SyncInstance & { limiter: RateLimiter } {
  const store = new RedisStore({ client: context.newClient() })
  if (tally !== undefined) {
    const lease = store.lease.bind(store)
    store.lease = (batch) => {
      tally.requests += batch.length
      tally.calls++
      return lease(batch)
    }
  }
  // The timeout is generous so that a busy machine measures throughput, not fallbacks.
  const limiter = new RateLimiter({ store, policies: [policy], timeout: '5s', ...(denyCache ? {} : { denyCache: false }) })
  context.onClose(async () => {
    await limiter.close()
    await store.close()
  })
  const denied = (decision: Decision): boolean => {
    // A decision the failure mode made would flatter the row.
    if (decision.source !== 'lease' && decision.source !== 'store') throw new Error(`decision came from ${decision.source}`)
    return !decision.allowed
  }
  return { limit: (key) => limiter.limit(key), denied, decide: async (key) => !denied(await limiter.limit(key)), limiter }
}

/**
 * The lease contenders: every request admitted (the limit is far away), on 10k keys with the default
 * leaseMs (1 s) and with leaseMs 10 s, and on one key. The 10k-key rows measure keys in use: each
 * round is preceded by WARM_MS of the same load, outside the measurement (the interleaved rounds leave
 * every key idle for the other contenders' rounds in between), and ends, inside it, when every lease
 * has been given back (their returns are in its time and its Redis CPU, not the next contender's).
 */
export function leaseContenders(context: LeaseBenchContext): Contender[] {
  // The exact gcra row's policy (live state between a key's visits, see benchPolicy in redis.ts).
  const policy: PolicyOptions = { algorithm: 'gcra', limit: 1_000, burst: context.limit, period: `${context.periodS}s`, sync: 'lease' }
  const contender = (name: string, keyOf: (i: number) => string, options: Partial<PolicyOptions> = {}, warm = false): Contender => {
    const tally = new StoreTally(false)
    context.storeTallies.push({ name, tally })
    const row = instanceWithLimiter(context, { ...policy, ...options }, true, tally)
    return syncContender(context, name, keyOf, row, () => row.limiter.flush(), warm, undefined, tally)
  }
  const key10k = (i: number) => `lease:${(i * 7919) % context.keys}`
  return [
    contender(LEASE_10K, key10k, {}, true),
    contender(LEASE_10K_LONG, (i) => `lease-long:${(i * 7919) % context.keys}`, { leaseMs: '10s' }, true),
    contender(LEASE_HOT, () => 'lease-hot'),
  ]
}

/**
 * Under-admission on one saturated hot key: four lease instances in this process (each its own
 * client and leases, so they meet only in Redis), 64 callers each, against a GCRA policy. What the
 * policy allows in the run is burst + rate × duration; leases never admit more, and the gap is
 * printed beside its bound: N × leaseMax (the units the instances can hold unspent at once) plus
 * what the full bucket refilled in vain before the first answer.
 */
export async function printLeaseUnderAdmission(context: LeaseBenchContext, durationMs: number): Promise<void> {
  const rows: string[][] = []
  for (const leaseMax of [50, 250, 1000]) {
    const instances = 4
    const rate = 20_000 // per second
    const burst = 2_000
    const policy: PolicyOptions = { algorithm: 'gcra', limit: rate, burst, period: '1s', sync: 'lease', leaseMax }
    // Without the deny cache, so every denial is the lease engine's own.
    const fleet = Array.from({ length: instances }, () => instance(context, policy, false))
    const key = `lease-under-${leaseMax}-${Date.now()}`
    // From before the first request to the last admission. The first admission would start the window
    // too late: its lease was taken earlier, and the units handed out between them (20 per ms) would
    // show as over-admission that never happened. Before the first lease arrives a full bucket refills
    // nothing, so this counts up to one store round trip of rate too many, on the side of `under`.
    let first = 0
    let last = 0
    const started = performance.now()
    const { decisions, admitted } = await hammerHotKey(fleet, key, durationMs, () => {
      last = performance.now()
      if (first === 0) first = last
    })
    const allowed = burst + (rate * Math.max(0, last - started)) / 1000
    // What a full bucket refilled in vain before the first answer came back (counted in `allowed`).
    const startGap = (rate * Math.max(0, first - started)) / 1000
    rows.push([
      String(leaseMax),
      formatCount(decisions),
      formatCount(decisions - admitted),
      formatCount(admitted),
      formatCount(allowed),
      `${((100 * admitted) / allowed).toFixed(1)}%`,
      formatCount(Math.max(0, admitted - allowed)),
      formatCount(Math.max(0, allowed - admitted)),
      `${(first - started).toFixed(1)} ms`,
      formatCount(instances * leaseMax + startGap),
    ])
  }
  printTable(
    ['leaseMax', 'decisions', 'denied', 'admitted', 'policy allows', 'admitted/allows', 'over', 'under', 'first answer', 'bound'],
    rows,
    `Lease admission: 4 instances × 64 callers on one saturated hot key, gcra 20,000/s burst 2,000, ${durationMs} ms each\n` +
      '(policy allows = burst + rate × (last admission − first request), so "over" must be 0; under = allows − admitted, meaningful\n' +
      'when the key is saturated (denied > 0): with few denials the callers could not ask faster than a store round trip;\n' +
      'bound = N × leaseMax (held unspent at the end) + rate × first answer (a full bucket refills nothing before it))',
  )
}
