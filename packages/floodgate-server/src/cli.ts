// The `floodgate` command: `serve` the service, `validate` a rules file, `check` a running service.
// Each command's modules load only when it runs, so --version, --help and a mistyped command answer
// at about the speed of Node itself.

import { readFileSync } from 'node:fs'
import { suggest } from './service/serve-help.js'

const USAGE = `Usage:
  floodgate serve --config <file|dir> [options]     run the rate-limit service (see floodgate serve --help)
  floodgate validate <file|dir>                     check a rules file or directory; exit 1 on errors
  floodgate check --url <http://host:port> --domain <domain> key=value [key=value…] [--hits n] [--json]
                                                    ask a running service; exit 0 allowed, 1 limited, 2 error
  floodgate --version                               print the version of floodgate-server`

const COMMANDS = ['serve', 'validate', 'check', 'help']

/** The version of this package, from its package.json: one level above src/ in the repository and above dist/ when installed. */
export function version(): string {
  const manifest = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
  return manifest.version
}

/** Runs one command; resolves with the exit code (`serve` resolves only after shutdown). */
export async function main(argv: readonly string[]): Promise<number> {
  const [command, ...rest] = argv
  try {
    switch (command) {
      case 'serve':
        return await (await import('./commands/serve.js')).serve(rest)
      case 'validate':
        return (await import('./commands/validate.js')).validate(rest)
      case 'check':
        return await (await import('./commands/check.js')).check(rest)
      case '--version':
      case '-v':
        process.stdout.write(`${version()}\n`)
        return 0
      case undefined:
      case 'help':
      case '--help':
      case '-h':
        process.stdout.write(`${USAGE}\n`)
        return command === undefined ? 2 : 0
      default: {
        const near = suggest(command, COMMANDS)
        const hint = near === undefined ? '' : `; did you mean ${near}?`
        process.stderr.write(`floodgate: unknown command ${JSON.stringify(command)}${hint}\n${USAGE}\n`)
        return 2
      }
    }
  } catch (error) {
    return (await import('./commands/report-failure.js')).reportFailure(error)
  }
}

// Run when executed directly (bin/floodgate.js imports it; tests import `main`).
const entry = process.argv[1] ?? ''
if (/(?:^|[\\/])cli\.(?:ts|js)$/.test(entry)) {
  // Exit explicitly: after a shutdown, a client library's stray timer must not keep the process up.
  main(process.argv.slice(2)).then((code) => process.exit(code))
}
