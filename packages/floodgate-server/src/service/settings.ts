// Settings of `floodgate serve`: every option from a CLI flag or an environment variable, read once and validated.
// The type is in settings-types.ts, the schema in settings-schema.ts; this file reads argv and the environment.

import { parseArgs } from 'node:util'
import type { z } from 'zod'
import { FloodgateError } from 'floodgate'
import { readUpstreamEnvironment } from './upstream-env.js'
import { readXdsSettings } from './xds/xds-settings.js'
import { type OptionName, type OptionSpec, SERVE_OPTIONS } from './serve-options.js'
import { unknownFlagMessage } from './serve-help.js'
import { schema } from './settings-schema.js'
import type { Settings } from './settings-types.js'
import { telemetrySchema, telemetrySettings } from './telemetry-settings.js'

export type { RegionSettings } from './region-settings.js'
export type { HostPort, Settings, StoreSettings } from './settings-types.js'
export type { AbuseBounds } from './abuse-bounds.js'
export type { StatsdSettings, TelemetrySettings, TracingSettings } from './telemetry-settings.js'

type RawOptions = Partial<Record<OptionName, string | boolean | string[]>>

/**
 * Reads the settings from `argv` (the arguments after `serve`) and `env`; a flag wins over its
 * variable. The rules path may also be the one positional argument. Throws FloodgateError
 * (INVALID_OPTION) naming the flag and variable when something is wrong.
 */
export function readSettings(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): Settings {
  // envoyproxy/ratelimit's variables (REDIS_URL, PORT, RUNTIME_ROOT, …) first become Floodgate's.
  const upstream = readUpstreamEnvironment(env)
  const raw = rawOptions(argv, upstream.env)
  // CONFIG_TYPE=GRPC_XDS_SOTW: the management server is the rules' source, and no file is needed.
  const xds = readXdsSettings(env)
  if (xds !== undefined) {
    if (raw.config !== undefined)
      upstream.notes.push(`rules files (${raw.config}) are ignored with CONFIG_TYPE=GRPC_XDS_SOTW, as upstream ignores them`)
    raw.config = `xds:${xds.serverUrl}`
  }
  const parsed = checked(schema.safeParse(raw))
  // statsd and tracing are read apart: their mogrifiers' definitions are variables of their own.
  const telemetry = telemetrySettings(checked(telemetrySchema.safeParse(raw)), upstream.env)
  return { ...parsed, ...telemetry, upstreamNotes: upstream.notes, ...(xds === undefined ? {} : { xds }) }
}

/** The parsed value, or FloodgateError (INVALID_OPTION) naming the flag and variable of the first issue. */
function checked<T>(parsed: z.ZodSafeParseResult<T>): T {
  if (parsed.success) return parsed.data
  const issue = parsed.error.issues[0]
  const name = issue.path[0] as OptionName | undefined
  const where = name ? `--${SERVE_OPTIONS[name].flag} / ${SERVE_OPTIONS[name].env}` : 'options'
  throw new FloodgateError('INVALID_OPTION', `${where}: ${issue.message}`)
}

function rawOptions(argv: readonly string[], env: NodeJS.ProcessEnv): RawOptions {
  const options = Object.fromEntries(
    Object.values(SERVE_OPTIONS).map((o: OptionSpec) => [o.flag, { type: o.type, multiple: o.multiple ?? false }]),
  )
  const unknown = unknownFlagMessage(argv)
  if (unknown !== undefined) throw new FloodgateError('INVALID_OPTION', unknown)
  let values: Record<string, string | boolean | string[] | undefined>
  let positionals: string[]
  try {
    ;({ values, positionals } = parseArgs({ args: [...argv], options, allowPositionals: true, strict: true }) as {
      values: Record<string, string | boolean | string[] | undefined>
      positionals: string[]
    })
  } catch (error) {
    throw new FloodgateError('INVALID_OPTION', `${(error as Error).message}; run \`floodgate serve --help\` for the options`)
  }
  if (positionals.length > 1) {
    throw new FloodgateError('INVALID_OPTION', `unexpected arguments ${positionals.slice(1).join(' ')}; give one rules path`)
  }
  const raw: RawOptions = {}
  for (const [name, spec] of Object.entries(SERVE_OPTIONS) as [OptionName, OptionSpec][]) {
    const fromFlag = values[spec.flag]
    const fromEnv = env[spec.env]
    if (fromFlag !== undefined) raw[name] = fromFlag
    else if (fromEnv !== undefined && fromEnv !== '') {
      raw[name] =
        spec.type === 'boolean'
          ? parseBooleanEnv(fromEnv, spec.env)
          : spec.multiple
            ? fromEnv
                .split(',')
                .map((item) => item.trim())
                .filter(Boolean)
            : fromEnv
    }
  }
  if (raw.config === undefined && positionals[0] !== undefined) raw.config = positionals[0]
  return raw
}

function parseBooleanEnv(value: string, name: string): boolean {
  if (/^(1|t|true|yes|on)$/i.test(value)) return true // t/f: Go's ParseBool, for upstream's variables
  if (/^(0|f|false|no|off)$/i.test(value)) return false
  throw new FloodgateError('INVALID_OPTION', `${name}: expected true or false, got ${JSON.stringify(value)}`)
}
