// Config errors: every problem found in a rules file set, each with file, line, tree path and a fix.

import { FloodgateError } from '../core/errors.js'

/** One problem in a rules file: where it is and what to change. */
export interface ConfigIssue {
  /** The file as it was given to the loader (path or name). */
  file: string
  /** 1-based line of the offending node, when the file parsed far enough to know it. */
  line?: number
  /** 1-based column of the offending node. */
  column?: number
  /** Where in the tree, e.g. `descriptors[0].descriptors[1].rate_limit.unit`; empty for the whole file. */
  path: string
  /** What is wrong and what to write instead. */
  message: string
}

/** Formats one issue the way compilers do (`file:line:column path: message`), for logs and the CLI. */
export function formatIssue(issue: ConfigIssue): string {
  let where = issue.file
  if (issue.line !== undefined) {
    where += `:${issue.line}`
    if (issue.column !== undefined) where += `:${issue.column}`
  }
  return issue.path === '' ? `${where}: ${issue.message}` : `${where} ${issue.path}: ${issue.message}`
}

/**
 * A rules file set that cannot be loaded. Carries every issue found in one pass, so a user fixes
 * them all at once instead of one per run; the message lists them too.
 */
export class ConfigError extends FloodgateError {
  readonly issues: ConfigIssue[]

  constructor(issues: ConfigIssue[]) {
    const count = issues.length === 1 ? '1 issue' : `${issues.length} issues`
    super('INVALID_CONFIG', `invalid rate limit rules (${count}):\n${issues.map((i) => `  ${formatIssue(i)}`).join('\n')}`)
    this.name = 'ConfigError'
    this.issues = issues
  }
}
