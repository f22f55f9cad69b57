// `floodgate serve`: read the settings, start the service, and run until SIGTERM or SIGINT drains it.

import { format } from 'node:util'
import type { Logger } from 'pino'
import { serveUsage, unknownFlagMessage } from '../service/serve-help.js'
import type { Settings } from '../service/settings.js'
import type { RunningService } from '../service/server.js'
import { wantsHelp } from './args.js'

/** Runs the service until a signal drains it; resolves with the exit code (0 after a clean shutdown). */
export async function serve(argv: readonly string[]): Promise<number> {
  if (wantsHelp(argv)) {
    process.stdout.write(`${serveUsage()}\n`)
    return 0
  }
  // Before the settings load: a typo is answered at once, with the flag it was probably meant to be.
  const unknown = unknownFlagMessage(argv)
  if (unknown !== undefined) {
    process.stderr.write(`floodgate: ${unknown}\n`)
    return 2
  }
  // Loaded only now: --help, --version, `validate` and `check` answer without the service's modules.
  const { readSettings } = await import('../service/settings.js')
  const settings = readSettings(argv)
  const logger = await createLogger(settings, Boolean(process.stdout.isTTY))
  const { startService } = await import('../service/server.js')
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

async function createLogger(settings: Settings, isTTY: boolean): Promise<Logger> {
  const { pino } = await import('pino')
  const options = { level: settings.logLevel, base: { service: 'floodgate' } }
  if (logFormat(settings, isTTY) === 'json') return pino(options)
  const { default: pretty } = await import('pino-pretty')
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
