// The `floodgate` command: `serve` the service, `validate` a rules file, `check` a running service.

import { readFileSync } from 'node:fs'
import { format, parseArgs } from 'node:util'
import { pino, type Logger } from 'pino'
import pretty from 'pino-pretty'
import { FloodgateError } from 'floodgate'
import { ConfigError, formatIssue, loadRules } from 'floodgate/rules'
import { countRules } from './service/rule-count.js'
import { readSettings, serveUsage, type Settings } from './service/settings.js'
import type { RunningService } from './service/server.js'
import { type CheckResult, type DescriptorEntry, FloodgateClient } from 'floodgate/client'

const USAGE = `Usage:
  floodgate serve --config <file|dir> [options]     run the rate-limit service (see floodgate serve --help)
  floodgate validate <file|dir>                     check a rules file or directory; exit 1 on errors
  floodgate check --url <http://host:port> --domain <domain> key=value [key=value…] [--hits n] [--json]
                                                    ask a running service; exit 0 allowed, 1 limited, 2 error
  floodgate --version                               print the version of floodgate-server`

const VALIDATE_USAGE = `Usage: floodgate validate <file|dir>

Loads a rules file, or every .yaml/.yml file of a directory, as \`floodgate serve\` would.
Prints a summary and exits 0, or prints every error with file:line and path and exits 1.`

const CHECK_USAGE = `Usage: floodgate check --url <http://host:port> --domain <domain> key=value [key=value…] [options]

Asks a running service to decide one descriptor (its entries as key=value, in order).
  --url <url>        the service's HTTP address (required)
  --domain <domain>  the rules domain (required)
  --hits <n>         units to charge (default 1; 0 checks without counting)
  --timeout <ms>     longest wait for the answer (default 2s)
  --json             print the answer as JSON
Exit status: 0 allowed, 1 limited, 2 error.`

/** The version of this package, from its package.json: one level above src/ in the repository and above dist/ when installed. */
export function version(): string {
  const manifest = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
  return manifest.version
}

function wantsHelp(argv: readonly string[]): boolean {
  return argv.includes('--help') || argv.includes('-h')
}

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
      default:
        process.stderr.write(`floodgate: unknown command ${JSON.stringify(command)}\n${USAGE}\n`)
        return 2
    }
  } catch (error) {
    return reportFailure(error)
  }
}

async function serve(argv: readonly string[]): Promise<number> {
  if (wantsHelp(argv)) {
    process.stdout.write(`${serveUsage()}\n`)
    return 0
  }
  const settings = readSettings(argv)
  const logger = createLogger(settings, Boolean(process.stdout.isTTY))
  // Loaded here so `validate` and `check` do not load the limiter, stores and servers.
  const { startService } = await import('./service/server.js')
  await routeGrpcLogs(logger)
  let service: RunningService
  try {
    service = await startService(settings, { logger })
  } catch (error) {
    const line = listenFailure(error, settings)
    if (line === undefined) throw error
    process.stderr.write(`floodgate: ${line}\n`)
    return 1
  }
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
    // Only now: whoever waits for this line may signal at once, and a signal before the handlers
    // exist would kill the process (exit by SIGTERM, not 0) instead of draining it.
    process.stderr.write(listeningLine(service, settings))
  })
  return 0
}

/** The line `serve` prints once both servers (or the one asked for) listen. */
// The bound address, not a loopback URL: 0.0.0.0 means every interface, and the banner says so.
function listeningLine(service: RunningService, settings: Settings): string {
  const http = service.serving.http ? `HTTP ${service.httpBindUrl} (POST /v1/check, POST /json, GET /metrics)` : 'HTTP off'
  const grpc = service.serving.grpc ? `gRPC ${service.grpcAddress} (Envoy RLS v3)` : 'gRPC off'
  const exposure = service.allInterfaces ? ' — on all interfaces: reachable from other hosts (--host 127.0.0.1 for this one only)' : ''
  return `Floodgate listening: ${http}, ${grpc}, store ${settings.store.kind}${exposure}\n`
}

/**
 * The log format: `--log-format`, else human-readable on a terminal (pino-pretty, written
 * synchronously so nothing is lost at exit) and one JSON object per line for collectors.
 */
export function logFormat(settings: Pick<Settings, 'logFormat'>, isTTY: boolean): 'pretty' | 'json' {
  return settings.logFormat ?? (isTTY ? 'pretty' : 'json')
}

function createLogger(settings: Settings, isTTY: boolean): Logger {
  const options = { level: settings.logLevel, base: { service: 'floodgate' } }
  if (logFormat(settings, isTTY) === 'json') return pino(options)
  return pino(options, pretty({ colorize: isTTY, sync: true, ignore: 'pid,hostname,service' }))
}

/**
 * grpc-js writes its own errors to stderr (e.g. a second copy of a port-in-use failure, which
 * reaches us anyway through bindAsync): they go to the service's log at debug level instead.
 */
async function routeGrpcLogs(logger: Logger): Promise<void> {
  const grpc = await import('@grpc/grpc-js')
  grpc.setLogger({ error: (...args: unknown[]) => logger.debug({ component: 'grpc-js' }, format(...args)) })
}

const LISTEN_ERRORS = new Set(['EADDRINUSE', 'EACCES', 'EADDRNOTAVAIL'])

/**
 * One line for a server that could not listen: which port, which server, which flag to change.
 * Both fail with node's listen error (`code`, `port`); the gRPC server's also says `server: 'gRPC'`.
 */
export function listenFailure(error: unknown, settings: Pick<Settings, 'host' | 'httpPort' | 'grpcPort'>): string | undefined {
  const failure = error as { code?: unknown; port?: unknown; server?: unknown } | null
  if (failure === null || typeof failure !== 'object') return undefined
  if (typeof failure.code !== 'string' || !LISTEN_ERRORS.has(failure.code)) return undefined
  const server = failure.server === 'gRPC' ? 'gRPC' : 'HTTP'
  const code = failure.code
  const port = typeof failure.port === 'number' ? failure.port : server === 'HTTP' ? settings.httpPort : settings.grpcPort
  const flag = server === 'HTTP' ? '--http-port' : '--grpc-port'
  if (code === 'EADDRINUSE') return `port ${port} is in use (${server}); choose another with ${flag}, or stop what holds it`
  if (code === 'EACCES') return `port ${port} needs privileges this process lacks (${server}); choose one above 1023 with ${flag}`
  return `address ${settings.host} is not one of this machine's (${server}); choose another with --host`
}

function validate(argv: readonly string[]): number {
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

async function check(argv: readonly string[]): Promise<number> {
  if (wantsHelp(argv)) {
    process.stdout.write(`${CHECK_USAGE}\n`)
    return 0
  }
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
  if (!Number.isInteger(hits) || hits < 0)
    throw new FloodgateError('INVALID_OPTION', `check: --hits must be a whole number ≥ 0, got ${values.hits}`)
  const client = new FloodgateClient({
    url: values.url,
    timeout: (values.timeout as `${number}ms` | undefined) ?? '2s',
    failOpen: false,
    warm: false,
  })
  const result = await client.check({ domain: values.domain, descriptors: [entries], hits })
  client.close()
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
    else if ('replaced' in r) lines.push(`  rule ${r.rule}: replaced by another descriptor's rule (replaces:), not applied`)
    else {
      const state = r.allowed ? (r.wouldDeny ? 'allowed (shadow mode, would deny)' : 'allowed') : 'denied'
      lines.push(
        `  rule ${r.rule}, policy ${r.policy}: ${state}, ${r.remaining}/${r.limit} remaining, resets in ${Math.ceil(r.resetMs / 1000)}s`,
      )
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
