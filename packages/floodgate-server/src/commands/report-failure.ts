// How a command's failure reads: rules errors with file:line, a user's mistake in one line, a bug with its stack.

import { FloodgateError } from 'floodgate'
import { ConfigError, formatIssue } from 'floodgate/rules'
import { plural } from './args.js'

/** Prints `error` for a user and returns the exit code: 1 for rules errors, 2 for anything else. */
export function reportFailure(error: unknown): number {
  if (error instanceof ConfigError) {
    process.stderr.write(`${error.issues.map(formatIssue).join('\n')}\n${plural(error.issues.length, 'error')} in the rules\n`)
    return 1
  }
  if (error instanceof FloodgateError || (error as { code?: string })?.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
    process.stderr.write(`floodgate: ${(error as Error).message}\n`)
    return 2
  }
  process.stderr.write(`floodgate: ${(error as Error)?.stack ?? String(error)}\n`)
  return 2
}
