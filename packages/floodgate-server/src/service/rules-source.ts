// Where the service's rules come from: a watched rules file or directory, a snapshot, or an xDS management server.

import type { Logger } from 'pino'
import { ConfigError, formatIssue, loadRules, type RuleSet, type RuleSetOptions, RuleWatcher } from 'floodgate/rules'
import { protoDir } from './grpc-server.js'
import type { ServiceMetrics } from './metrics.js'
import { countRules } from './rule-count.js'
import type { Settings } from './settings.js'

/** Holds the rules: a watcher that hot-reloads them, or a snapshot loaded once (`--no-watch`). */
export interface RulesSource {
  readonly current: RuleSet
  /** False only while an xDS source waits for its first config. */
  readonly loaded?: boolean
  /** The issues of the latest failed reload, until a reload succeeds. */
  readonly lastError: ConfigError | undefined
  reload(): boolean
  close(): Promise<void>
}

/** The rules source `settings` ask for: an xDS management server, a watched file or directory, or a snapshot. */
export async function openRules(settings: Settings, logger: Logger, metrics: ServiceMetrics): Promise<RulesSource> {
  if (settings.xds !== undefined) return openXdsRules(settings, logger, metrics)
  const options = ruleOptions(settings)
  if (!settings.watch) return loadOnce(settings.config, options, logger, metrics)
  const watcher = new RuleWatcher(settings.config, options)
  metrics.recordReload('success', countRules(watcher.current))
  watcher.on('reload', (next) => {
    metrics.recordReload('success', countRules(next))
    logger.info({ files: next.files }, 'rules reloaded')
  })
  watcher.on('error', (error: ConfigError) => {
    metrics.recordReload('error')
    logger.error({ issues: error.issues.map(formatIssue) }, 'rules reload failed; keeping the previous rules')
  })
  return watcher
}

/**
 * Rules pushed by an xDS management server (CONFIG_TYPE=GRPC_XDS_SOTW). Its client, protos and
 * decoder are loaded only here, so a service reading files never loads them. The service starts
 * at once, without rules: until the first config, nothing matches and nothing is limited.
 */
async function openXdsRules(settings: Settings, logger: Logger, metrics: ServiceMetrics): Promise<RulesSource> {
  const { XdsRules } = await import('./xds/xds-rules.js')
  const xds = settings.xds as NonNullable<Settings['xds']>
  const source = new XdsRules(xds, { protoDir: protoDir(), ...ruleOptions(settings) })
  source.on('reload', (next) => {
    metrics.recordReload('success', countRules(next))
    logger.info({ version: source.version, domains: next.files }, 'rules received from the xDS management server')
  })
  source.on('error', (error: ConfigError) => {
    metrics.recordReload('error')
    logger.error({ issues: error.issues.map(formatIssue) }, 'xDS config rejected (NACK); keeping the previous rules')
  })
  source.on('disconnect', ({ reason, retryInMs }) => {
    logger.warn({ server: xds.serverUrl, reason, retryInMs }, 'xDS management server stream lost; reconnecting')
  })
  return source
}

function ruleOptions(settings: Settings): RuleSetOptions {
  return { wildcardOrder: settings.wildcardOrder, mergeDomains: settings.mergeDomains }
}

/** Rules without a file watch: loaded at start, and again only on `reload()` (SIGHUP). */
function loadOnce(path: string, options: RuleSetOptions, logger: Logger, metrics: ServiceMetrics): RulesSource {
  let current = loadRules(path, options)
  let lastError: ConfigError | undefined
  metrics.recordReload('success', countRules(current))
  return {
    get current() {
      return current
    },
    get lastError() {
      return lastError
    },
    reload() {
      try {
        current = loadRules(path, options)
        lastError = undefined
        metrics.recordReload('success', countRules(current))
        logger.info({ files: current.files }, 'rules reloaded')
        return true
      } catch (error) {
        if (!(error instanceof ConfigError)) throw error
        lastError = error
        metrics.recordReload('error')
        logger.error({ issues: error.issues.map(formatIssue) }, 'rules reload failed; keeping the previous rules')
        return false
      }
    },
    close: async () => {},
  }
}
