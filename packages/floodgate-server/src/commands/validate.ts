// `floodgate validate`: load a rules file or directory as `serve` would, and say what it holds or what is wrong.

import { parseArgs } from 'node:util'
import { FloodgateError } from 'floodgate'
import { loadRules } from 'floodgate/rules'
import { countRules } from '../service/rule-count.js'
import { plural, wantsHelp } from './args.js'

const VALIDATE_USAGE = `Usage: floodgate validate <file|dir>

Loads a rules file, or every .yaml/.yml file of a directory, as \`floodgate serve\` would.
Prints a summary and exits 0, or prints every error with file:line and path and exits 1.`

export function validate(argv: readonly string[]): number {
  if (wantsHelp(argv)) {
    process.stdout.write(`${VALIDATE_USAGE}\n`)
    return 0
  }
  const { positionals } = parseArgs({ args: [...argv], allowPositionals: true, options: {} })
  if (positionals.length !== 1)
    throw new FloodgateError('INVALID_OPTION', 'validate: give one rules file or directory, e.g. floodgate validate rules.yaml')
  const rules = loadRules(positionals[0])
  const domains = [...rules.domains]
  process.stdout.write(
    `OK: ${plural(rules.files.length, 'file')}, ${plural(domains.length, 'domain')} (${domains.join(', ')}), ` +
      `${plural(countRules(rules), 'rule')}\n`,
  )
  return 0
}
