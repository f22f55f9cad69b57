// What the lease and write-back sections of `npm run bench:redis` share: their summary beside the
// exact mode and rate-limiter-flexible, their rows under the bench's load, and a fleet of instances
// saturating one hot key.

import type { Redis } from 'ioredis'
import { formatCount, median, printTable, ratio, runLoad, type Contender } from './support.js'
import type { Decision } from '../packages/floodgate/src/index.js'
import type { WriteBackBenchContext } from './write-back.js'

/**
 * The load before each measured round of a 10k-key row, outside the measurement (keys in use). Long
 * enough that a lease sized from a key's first requests after the other contenders' rounds (its
 * demand forgotten meanwhile) has run short and been renewed at the key's demand before the round.
 */
export const WARM_MS = 2000

/** One limiter instance of a sync row. */
export interface SyncInstance {
  /** A decision, as an application awaits it (the throughput rows count it as it comes). */
  limit: (key: string) => Promise<Decision>
  /** Whether a decision denied; throws for one the mode did not make (a fallback would flatter the row). */
  denied: (decision: Decision) => boolean
  /** limit then denied, as one call: whether the request was admitted (for the admission tables). */
  decide: (key: string) => Promise<boolean>
}

/**
 * A row of a sync mode: `row.limit` under the bench's load over `keyOf`'s keys, after WARM_MS of it when
 * `warm`, then `endWarm` (write-back flushes what the warm-up admitted: its units are not this
 * round's work; the copies, like held leases, stay). The round ends once `settle` has handed the
 * store what the instance holds (a flush, leases given back), so that work is in this row's time and
 * Redis CPU, not the next contender's.
 */
export function syncContender(
  context: WriteBackBenchContext,
  name: string,
  keyOf: (i: number) => string,
  row: SyncInstance,
  settle: () => Promise<void>,
  warm: boolean,
  endWarm: () => Promise<void> = async () => {},
  tally?: StoreTally,
): Contender {
  const load = (durationMs: number) =>
    runLoad({
      callers: context.callers,
      durationMs,
      maxOps: context.maxOpsPerRound,
      ...context.counted(name, (i) => row.limit(keyOf(i)), row.denied),
    })
  return {
    name,
    before: warm ? () => load(WARM_MS).then(endWarm) : undefined,
    async measure() {
      const requests = tally?.requests ?? 0
      const calls = tally?.calls ?? 0
      const started = performance.now()
      const result = await load(context.roundMs)
      await settle()
      const ms = performance.now() - started
      tally?.rounds.push({ requests: tally.requests - requests, calls: tally.calls - calls, decisions: result.ops, ms })
      return (result.ops * 1000) / ms
    },
  }
}

/** One contender's samples, as the main bench's interleaved rounds give them. */
export interface SyncResult {
  name: string
  median: number
  samples: number[]
}

/** The `mode`'s rows (`rowNames`) beside the exact mode and rate-limiter-flexible, from the same run. */
export function printSyncSummary(
  mode: string,
  rowNames: readonly string[],
  results: readonly SyncResult[],
  redisCpu: (name: string) => number[],
  exactName: string,
  rlfName: string,
): void {
  const exact = results.find((r) => r.name === exactName)!.median
  const rlf = results.find((r) => r.name === rlfName)!.median
  const rows = results
    .filter((r) => rowNames.includes(r.name) || r.name === exactName || r.name === rlfName)
    .map((r) => {
      const cpu = redisCpu(r.name)
      const perDecision = median(cpu.map((busy, i) => busy / r.samples[i])) * 1e6
      return [r.name, formatCount(r.median), ratio(r.median, rlf), ratio(r.median, exact), perDecision.toFixed(3)]
    })
  printTable(
    ['contender', 'median decisions/s', 'vs rlf', 'vs exact', 'redis µs/decision'],
    rows,
    `${mode} beside the exact mode (targets: ≥ 10x rate-limiter-flexible, ≥ 5x exact, ≤ 0.2 µs of Redis CPU per decision)`,
  )
}

/**
 * 64 callers per instance of `fleet` deciding `key` for `durationMs`; `onAdmitted` hears each
 * admission as it happens. Returns how many decisions were made and how many admitted.
 */
export async function hammerHotKey(
  fleet: readonly ((key: string) => Promise<boolean>)[],
  key: string,
  durationMs: number,
  onAdmitted: () => void = () => {},
): Promise<{ decisions: number; admitted: number }> {
  let decisions = 0
  let admitted = 0
  await Promise.all(
    fleet.map((decide) =>
      runLoad({
        callers: 64,
        durationMs,
        maxOps: Number.MAX_SAFE_INTEGER,
        op: async () => {
          decisions++
          if (await decide(key)) {
            admitted++
            onAdmitted()
          }
        },
      }),
    ),
  )
  return { decisions, admitted }
}

/**
 * What a sync row asked of the store: requests (each reads and writes one key: a merge, a lease call)
 * and calls (write-back: flushes, each one `merge` of every key touched since the last), counted by
 * the row's store, and per measured round (the settle included, the warm-up not).
 */
export class StoreTally {
  /** Whether `calls` are flushes (write-back); a lease row's are its engine's calls of one key each. */
  constructor(readonly flushes: boolean) {}
  requests = 0
  calls = 0
  readonly rounds: { requests: number; calls: number; decisions: number; ms: number }[] = []
}

/**
 * The cheapest script that writes a batch of keys and keeps them alive: HINCRBY and PEXPIRE per key
 * (ARGV: units, ttl). A flush (or a lease call) must at least do that for every key it carries.
 */
export const KEY_WRITE_FLOOR = {
  script: "for i = 1, #KEYS do redis.call('HINCRBY', KEYS[i], 'n', ARGV[1]) redis.call('PEXPIRE', KEYS[i], ARGV[2]) end return #KEYS",
  args: (): string[] => ['3', '3600000'],
}

let mergeFloorSeq = 0
/**
 * The least a merge that counts a resent flush once must do: write every key (add its units, keep
 * it alive, answer them) and one idempotency token per call (SET NX PX of origin and seq; ARGV:
 * origin, seq, units), as merge-runner.lua's token per slot does. Still none of Floodgate's work:
 * no algorithm, no record format, no expiry following the state.
 */
export const IDEMPOTENT_MERGE_FLOOR = {
  script:
    "local out = {} local fresh = redis.call('SET', 'floor-token:' .. ARGV[1] .. ':' .. ARGV[2], '1', 'NX', 'PX', '60000') " +
    "for i = 1, #KEYS do local k = KEYS[i] if fresh then out[i] = redis.call('HINCRBY', k, 'n', ARGV[3]) " +
    "redis.call('PEXPIRE', k, '3600000') else out[i] = tonumber(redis.call('HGET', k, 'n') or '0') end end return out",
  // As long as a write-back instance's own origin (`wb-` and 12 random characters); a new seq each call.
  args: (): string[] => ['wb-0123456789ab', String(++mergeFloorSeq), '3'],
}

/**
 * The least a merge of Floodgate's records must do without its algorithm: read the batch's records
 * (one MGET), write each back in place (SETRANGE of the stored text; a new key gets a record of three
 * numbers and its expiry) and answer them. merge-runner.lua does this and more per key: the token,
 * decoding the record, the algorithm's merge and ttl, encoding the new record and its expiry.
 */
export const RECORD_MERGE_FLOOR = {
  script:
    "local texts = redis.call('MGET', unpack(KEYS)) local out = {} for i = 1, #KEYS do local text = texts[i] " +
    "if text then redis.call('SETRANGE', KEYS[i], '0', text) else text = ARGV[1] redis.call('SET', KEYS[i], text, 'PX', '3600000') end " +
    'out[i] = text end return table.concat(out)',
  // An 'S' record (record.lua) of three numbers: tag, expiry, state.
  args: (): string[] => ['S'.padEnd(33, '\u0001')],
}

/**
 * Redis CPU (µs, INFO cpu user + sys, as the rows are measured) per key written by `floor` (one of
 * the scripts above), 500 keys per call, over `keys` keys; the least of five trials.
 */
export async function keyWriteFloor(
  client: Redis,
  admin: Redis,
  keys: number,
  floor: { script: string; args: () => string[] } = KEY_WRITE_FLOOR,
): Promise<number> {
  const sha = String(await admin.script('LOAD', floor.script))
  const pass = async (): Promise<void> => {
    const calls: Promise<unknown>[] = []
    for (let from = 0; from < keys; from += 500) {
      const batch = Array.from({ length: Math.min(500, keys - from) }, (_, j) => `floor:${from + j}`)
      calls.push(client.evalsha(sha, batch.length, ...batch, ...floor.args()))
    }
    await Promise.all(calls)
  }
  const cpu = async (): Promise<number> => {
    const info = await admin.info('cpu')
    const field = (name: string): number => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1] ?? 0)
    return field('used_cpu_user') + field('used_cpu_sys')
  }
  await pass()
  let least = Infinity
  for (let trial = 0; trial < 5; trial++) {
    const before = await cpu()
    for (let i = 0; i < 4; i++) await pass()
    least = Math.min(least, ((await cpu()) - before) / (4 * keys))
  }
  await admin.eval("for i = 0, tonumber(ARGV[1]) - 1 do redis.call('DEL', 'floor:' .. i) end", 0, String(keys))
  return least * 1e6
}

/**
 * Each tallied row's Redis CPU per decision beside its floor: the floor per key written × the keys
 * its store calls carried ÷ its decisions, in the same rounds (write-back: keys per flush × flushes/s
 * ÷ decisions/s). What the sync mode cannot go below without writing fewer keys. For the write-back
 * rows also beside the floor of a merge that counts a resend once (`mergeFloorUs` per key).
 */
export function printSyncFloor(
  rows: readonly { name: string; tally: StoreTally }[],
  results: readonly SyncResult[],
  redisCpu: (name: string) => number[],
  floorUs: number,
  mergeFloorUs: number,
): void {
  const table = rows
    .filter((row) => row.tally.rounds.length > 0 && results.some((r) => r.name === row.name))
    .map(({ name, tally }) => {
      const result = results.find((r) => r.name === name)!
      const cpu = redisCpu(name)
      const measured = median(cpu.map((busy, i) => busy / result.samples[i])) * 1e6
      const perDecision = median(tally.rounds.map((round) => round.requests / round.decisions))
      const perFlush = median(tally.rounds.map((round) => (round.calls > 0 ? round.requests / round.calls : 0)))
      const flushesPerS = median(tally.rounds.map((round) => (round.calls * 1000) / round.ms))
      const floor = floorUs * perDecision
      return [
        name,
        formatCount(result.median),
        formatCount(median(tally.rounds.map((round) => round.requests))),
        tally.flushes ? formatCount(perFlush) : '-',
        tally.flushes ? flushesPerS.toFixed(2) : '-',
        (perDecision * 1000).toFixed(2),
        floor.toFixed(3),
        tally.flushes ? (mergeFloorUs * perDecision).toFixed(3) : '-',
        measured.toFixed(3),
        floor > 0 ? `${(measured / floor).toFixed(1)}x` : '-',
      ]
    })
  printTable(
    [
      'contender',
      'median decisions/s',
      'keys written/round',
      'keys per flush',
      'flushes/s',
      'keys per 1k decisions',
      'floor µs/decision',
      'merge floor µs/decision',
      'redis µs/decision',
      'vs floor',
    ],
    table,
    `Sync rows beside their floor: ${floorUs.toFixed(2)} µs of Redis CPU per key written (HINCRBY+PEXPIRE in a script, 500 keys\n` +
      "per call, measured in this run) × keys the row's store calls wrote ÷ its decisions (medians of the measured rounds,\n" +
      'settle included; write-back calls are flushes: keys per flush × flushes/s ÷ decisions/s). The merge floor: the same\n' +
      `with ${mergeFloorUs.toFixed(2)} µs per key, a script that counts a resent flush once (one SET NX token per call, also this run)`,
  )
}
