// Assembles the merge script RedisStore.merge runs (prelude, every algorithm twin, the record codec,
// merge.lua and merge-runner.lua) and runs it, as scripts.ts does the decision runner.

import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { ALGORITHMS } from '../../core/policy.js'
import type { Connection, ScriptArgument } from './connection.js'
import { SHEBANG, scriptsDirectory, type RunnerScript } from './scripts.js'

let cached: RunnerScript | undefined

/** The merge script, read from the `.lua` files once per process. */
export function mergerScript(): RunnerScript {
  if (cached === undefined) {
    const directory = scriptsDirectory()
    const read = (name: string) => readFileSync(`${directory}${name}.lua`, 'utf8')
    const source = [
      SHEBANG,
      read('prelude'),
      ...ALGORITHMS.map(read),
      read('record'),
      read('merge'),
      read('batch-args'),
      read('merge-runner'),
    ].join('\n')
    cached = Object.freeze({ source, sha: createHash('sha1').update(source).digest('hex') })
  }
  return cached
}

/** Runs the merge script by SHA, sending the source instead when the server does not know it (NOSCRIPT). */
export async function runMerger(connection: Connection, keys: readonly string[], args: readonly ScriptArgument[]): Promise<unknown> {
  const script = mergerScript()
  try {
    return await connection.evalBuffer('evalsha', script.sha, keys, args)
  } catch (error) {
    if (!(error instanceof Error && error.message.startsWith('NOSCRIPT'))) throw error
    return await connection.evalBuffer('eval', script.source, keys, args)
  }
}
