// How a test starts node on one of the repository's TypeScript files (a worker, a bench script).

import { existsSync } from 'node:fs'

/**
 * Node's arguments that run `file` with the repository's source condition. In the test runner's
 * compiled tree (scripts/compile-tests.mjs) the file's JavaScript lies beside it and runs as is, as
 * the test files do; elsewhere tsx loads the TypeScript, whose loader hooks cost a short-lived
 * process more CPU than its own work.
 */
export function scriptArgs(file: string): string[] {
  const compiled = file.replace(/\.ts$/, '.js')
  const run = compiled !== file && existsSync(compiled) ? [compiled] : ['--import', 'tsx', file]
  return ['--conditions=floodgate-source', ...run]
}
