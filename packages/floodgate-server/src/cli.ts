// The `floodgate` command: `serve` the service, `validate` a rules file, `check` a running service.

import { parseArgs } from 'node:util'
import { FloodgateError } from 'floodgate'
import { ConfigError, formatIssue, loadRules } from 'floodgate/rules'
import { countRules } from './service/rule-count.js'
import { readSettings, serveUsage } from './service/settings.js'
import { type CheckResult, type DescriptorEntry, FloodgateClient } from 'floodgate/client'

const USAGE = `Usage:
  floodgate serve --config <file|dir> [options]     run the rate-limit service (see floodgate serve --help)
  floodgate validate <file|dir>                     check a rules file or directory; exit 1 on errors
  floodgate check --url <http://host:port> --domain <domain> key=value [key=value…] [--hits n] [--json]
                                                    ask a running service; exit 0 allowed, 1 limited, 2 error`

/** Runs one command; resolves with the exit code (`serve` resolves only after shutdown). */
export async function main(argv: readonly string[]): Promise<number> {
  const [command, ...rest] = argv
  try {
    switch (command) {
      case 'serve':
        return await serve(rest)
      case 'validate':
        return validate(rest)
      case 'check':
        return await check(rest)
      case undefined:
      case 'help':
      case '--help':
      case '-h':
        process.stdout.write(`${USAGE}\n`)
        return command === undefined ? 2 : 0
      default:
        process.stderr.write(`floodgate: unknown command ${JSON.stringify(command)}\n${USAGE}\n`)
        return 2
    }
  } catch (error) {
    return reportFailure(error)
  }
}

async function serve(argv: readonly string[]): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`${serveUsage()}\n`)
    return 0
  }
  const settings = readSettings(argv)
  // Loaded here so `validate` and `check` do not load the limiter, stores and servers.
  const { startService } = await import('./service/server.js')
  const service = await startService(settings)
  process.stderr.write(
    `Floodgate listening: HTTP ${service.httpBindUrl} (POST /v1/check, POST /json, GET /metrics), gRPC ${service.grpcAddress} (Envoy RLS v3), store ${settings.store.kind}${service.allInterfaces ? ' — on all interfaces: reachable from other hosts (--host 127.0.0.1 for this one only)' : ''}\n`,
  )
  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      service.logger.info({ signal }, 'signal received')
      process.off('SIGTERM', onTerm)
      process.off('SIGINT', onInt)
      service.close().then(resolve, (error: unknown) => {
        service.logger.error({ err: error }, 'shutdown failed')
        resolve()
      })
    }
    const onTerm = () => stop('SIGTERM')
    const onInt = () => stop('SIGINT')
    process.on('SIGTERM', onTerm)
    process.on('SIGINT', onInt)
    // As many daemons do: SIGHUP re-reads the configuration (useful with --no-watch).
    process.on('SIGHUP', () => service.reloadRules())
  })
  return 0
}

function validate(argv: readonly string[]): number {
  const { positionals } = parseArgs({ args: [...argv], allowPositionals: true, options: {} })
  if (positionals.length !== 1) throw new FloodgateError('INVALID_OPTION', 'validate: give one rules file or directory, e.g. floodgate validate rules.yaml')
  const rules = loadRules(positionals[0])
  const domains = [...rules.domains]
  process.stdout.write(
    `OK: ${plural(rules.files.length, 'file')}, ${plural(domains.length, 'domain')} (${domains.join(', ')}), ${plural(countRules(rules), 'rule')}\n`,
  )
  return 0
}

async function check(argv: readonly string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: [...argv],
    allowPositionals: true,
    options: {
      url: { type: 'string' },
      domain: { type: 'string' },
      hits: { type: 'string' },
      timeout: { type: 'string' },
      json: { type: 'boolean' },
    },
  })
  if (values.url === undefined) throw new FloodgateError('INVALID_OPTION', 'check: --url is required, e.g. --url http://127.0.0.1:8080')
  if (values.domain === undefined) throw new FloodgateError('INVALID_OPTION', 'check: --domain is required, e.g. --domain edge')
  if (positionals.length === 0) throw new FloodgateError('INVALID_OPTION', 'check: give at least one key=value entry, e.g. user=alice')
  const entries = positionals.map(toEntry)
  const hits = values.hits === undefined ? 1 : Number(values.hits)
  if (!Number.isInteger(hits) || hits < 0) throw new FloodgateError('INVALID_OPTION', `check: --hits must be a whole number ≥ 0, got ${values.hits}`)
  const client = new FloodgateClient({ url: values.url, timeout: (values.timeout as `${number}ms` | undefined) ?? '2s', failOpen: false })
  const result = await client.check({ domain: values.domain, descriptors: [entries], hits })
  process.stdout.write(values.json ? `${JSON.stringify(result, null, 2)}\n` : describeResult(result))
  if (result.error !== undefined) return 2
  return result.allowed ? 0 : 1
}

function toEntry(text: string): DescriptorEntry {
  const at = text.indexOf('=')
  if (at <= 0) throw new FloodgateError('INVALID_OPTION', `check: expected key=value, got ${JSON.stringify(text)}`)
  return { key: text.slice(0, at), value: text.slice(at + 1) }
}

function describeResult(result: CheckResult): string {
  if (result.error !== undefined) return `error: ${result.error}\n`
  const lines = [result.allowed ? 'allowed' : `limited (retry after ${Math.ceil(result.retryAfterMs / 1000)}s)`]
  for (const r of result.results) {
    if (r.rule === null) lines.push('  no rule matches: allowed')
    else if ('unlimited' in r) lines.push(`  rule ${r.rule}: unlimited`)
    else {
      const state = r.allowed ? (r.wouldDeny ? 'allowed (shadow mode, would deny)' : 'allowed') : 'denied'
      lines.push(`  rule ${r.rule}, policy ${r.policy}: ${state}, ${r.remaining}/${r.limit} remaining, resets in ${Math.ceil(r.resetMs / 1000)}s`)
    }
  }
  return `${lines.join('\n')}\n`
}

function reportFailure(error: unknown): number {
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

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`
}

// Run when executed directly (bin/floodgate.js imports it; tests import `main`).
const entry = process.argv[1] ?? ''
if (/(?:^|[\\/])cli\.(?:ts|js)$/.test(entry)) {
  // Exit explicitly: after a shutdown, a client library's stray timer must not keep the process up.
  main(process.argv.slice(2)).then((code) => process.exit(code))
}
