// Assembles the one Lua script RedisStore runs (prelude, every algorithm twin, the record codec, the
// decision, leases' arithmetic for keys with live leases, the runner) and its SHA1.

import { createHash } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { ALGORITHMS } from '../../core/policy.js'
import type { Connection, ScriptArgument } from './connection.js'

/**
 * The script's first line. With it, one call may touch keys of several slots that the node serves
 * (the batch of a whole Cluster node); Redis 7.0 still refuses *declared* keys of several slots
 * (CROSSSLOT), so only one slot's keys go in KEYS (see runner.lua).
 */
export const SHEBANG = '#!lua flags=allow-cross-slot-keys'

/** The assembled script: its source (for EVAL) and SHA1 (for EVALSHA). */
export interface RunnerScript {
  readonly source: string
  readonly sha: string
}

let cached: RunnerScript | undefined

/** The runner script, read from the `.lua` files once per process. */
export function runnerScript(): RunnerScript {
  if (cached === undefined) {
    const directory = scriptsDirectory()
    const source = assembleRunner((name) => readFileSync(`${directory}${name}.lua`, 'utf8'))
    cached = Object.freeze({ source, sha: createHash('sha1').update(source).digest('hex') })
  }
  return cached
}

/**
 * The runner's source from its parts, `read(name)` giving scripts/<name>.lua: the one order, also
 * for bench/redis-lua-ab.ts, which assembles the runner of another revision to compare them.
 */
export function assembleRunner(read: (name: string) => string): string {
  const parts = [
    read('prelude'),
    ...ALGORITHMS.map(read),
    read('record'),
    read('evaluate'),
    read('batch-args'),
    // Redis runs a script's main chunk on every call, so lease.lua's tables and functions would be
    // made for every exact call: wrapped, they are made only by a call that meets live leases.
    'local function leasedExact()',
    read('lease'),
    read('leased-exact'),
    'return readLedgers, decideLeased\nend',
    read('runner'),
  ]
  return [SHEBANG, ...parts].join('\n')
}

// Next to this module in src/ and in dist/ alike: the build copies the .lua files, since tsc does not.
// The algorithms' twins and evaluate.lua are build output (scripts/gen-algorithms.mjs, gitignored): a
// checkout run on its sources (`--conditions=floodgate-source`) has them once npm install's `prepare`
// has run, and this names the way out when it has not, rather than a bare ENOENT mid-request.
export function scriptsDirectory(): string {
  const directory = fileURLToPath(new URL('./scripts/', import.meta.url))
  if (!existsSync(`${directory}runner.lua`)) {
    throw new Error(`Floodgate's Redis scripts (runner.lua) are missing from ${directory}: reinstall floodgate`)
  }
  const missing = [...ALGORITHMS, 'evaluate'].filter((name) => !existsSync(`${directory}${name}.lua`))
  if (missing.length > 0) {
    throw new Error(
      `Floodgate's generated Redis scripts (${missing.map((name) => `${name}.lua`).join(', ')}) are missing from ${directory}: ` +
        'in a checkout, run `node scripts/gen-algorithms.mjs` (npm install runs it); otherwise reinstall floodgate',
    )
  }
  return directory
}

/**
 * Runs the runner script by SHA, with a Buffer reply (one binary string). With ioredis the command
 * is written at once, not left to autopipelining's next tick: a Lane sends the next call while
 * handling a reply, and a deferred write would wait until every caller of that reply has been
 * answered (node-redis writes its queue from setImmediate, later in the same loop turn).
 * A server that does not know the script (restarted, failed over, or after `SCRIPT FLUSH`)
 * answers NOSCRIPT; then the call is sent once more with the full source, which runs it and
 * caches it on that very node (a separate SCRIPT LOAD could land on another Cluster node).
 */
export async function runRunner(connection: Connection, keys: readonly string[], args: readonly string[]): Promise<unknown> {
  const script = runnerScript()
  try {
    return await connection.evalBuffer('evalsha', script.sha, keys, args)
  } catch (error) {
    if (!isNoScript(error)) throw error
    return await connection.evalBuffer('eval', script.source, keys, args)
  }
}

function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT')
}

let cachedLease: RunnerScript | undefined

/** The lease script (lease-runner.lua after prelude, every algorithm twin, record.lua and lease.lua), read once per process. */
export function leaseScript(): RunnerScript {
  if (cachedLease === undefined) {
    const directory = scriptsDirectory()
    const read = (name: string) => readFileSync(`${directory}${name}.lua`, 'utf8')
    const source = [read('prelude'), ...ALGORITHMS.map(read), read('record'), read('lease'), read('lease-runner')].join('\n')
    cachedLease = Object.freeze({ source, sha: createHash('sha1').update(source).digest('hex') })
  }
  return cachedLease
}

/** Runs the lease script by SHA like runRunner, with the source once more after NOSCRIPT. */
export async function runLeaseRunner(connection: Connection, keys: readonly string[], args: readonly ScriptArgument[]): Promise<unknown> {
  const script = leaseScript()
  try {
    return await connection.evalBuffer('evalsha', script.sha, keys, args)
  } catch (error) {
    if (!isNoScript(error)) throw error
    return await connection.evalBuffer('eval', script.source, keys, args)
  }
}
