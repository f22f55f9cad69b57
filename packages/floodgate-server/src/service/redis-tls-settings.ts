// Settings of `floodgate serve` for reaching Redis: URL forms (unix sockets) and TLS files. Flags: REDIS_TLS_OPTIONS in serve-options.ts.

import { readFileSync } from 'node:fs'
import { z } from 'zod'
import { FloodgateError } from 'floodgate'
import type { RedisTlsSettings } from './redis-connection.js'

/** A Redis URL the service accepts: redis://, rediss:// (TLS) or unix:///absolute/path (a socket). */
export const redisUrl = z
  .string()
  .regex(/^(rediss?:\/\/|unix:\/\/\/)/, 'expected a redis://, rediss:// or unix:///path/to/redis.sock URL')
  .refine((url) => !url.startsWith('unix:') || new URL(url).pathname.length > 1, 'expected a socket path after unix://')
  .optional()

/** The zod fields of the TLS options, spread into the settings schema. */
export function redisTlsFields() {
  return {
    redisTls: z.boolean().optional(),
    redisTlsCa: z.string().min(1).optional(),
    redisTlsCert: z.string().min(1).optional(),
    redisTlsKey: z.string().min(1).optional(),
    redisTlsSkipHostnameVerification: z.boolean().optional(),
  }
}

interface RawTls {
  redisTls?: boolean
  redisTlsCa?: string
  redisTlsCert?: string
  redisTlsKey?: string
  redisTlsSkipHostnameVerification?: boolean
}

interface RawStore {
  redisUrl?: string
  redisCluster?: unknown
  redisSentinels?: unknown
  redisPerSecond?: string
}

/**
 * What is wrong with the TLS options, as [option, message], or undefined. A TLS file given where
 * no connection uses TLS is a mistake to report, not to ignore: the user believes it is in force.
 */
export function redisTlsIssue(o: RawTls & RawStore): [keyof RawTls, string] | undefined {
  if ((o.redisTlsCert === undefined) !== (o.redisTlsKey === undefined)) {
    return [o.redisTlsCert === undefined ? 'redisTlsKey' : 'redisTlsCert', 'give --redis-tls-cert and --redis-tls-key together']
  }
  if (o.redisTls && o.redisCluster === undefined && o.redisSentinels === undefined) {
    return ['redisTls', 'applies to --redis-cluster and --redis-sentinel; for --redis, use a rediss:// URL']
  }
  const anyTls = o.redisTls || [o.redisUrl, o.redisPerSecond].some((url) => url?.startsWith('rediss:'))
  const files = (['redisTlsCa', 'redisTlsCert', 'redisTlsSkipHostnameVerification'] as const).find(
    (name) => o[name] !== undefined && o[name] !== false,
  )
  if (files !== undefined && !anyTls) {
    return [files, 'only applies to TLS connections: use a rediss:// URL, or --redis-tls with --redis-cluster or --redis-sentinel']
  }
  return undefined
}

/** The parsed fields as settings, with the files read now: a missing file stops the start with its name. */
export function redisTlsSettings(o: RawTls): RedisTlsSettings {
  return {
    nodes: o.redisTls ?? false,
    ca: o.redisTlsCa === undefined ? undefined : readPem(o.redisTlsCa, '--redis-tls-ca / FLOODGATE_REDIS_TLS_CA'),
    cert: o.redisTlsCert === undefined ? undefined : readPem(o.redisTlsCert, '--redis-tls-cert / FLOODGATE_REDIS_TLS_CERT'),
    key: o.redisTlsKey === undefined ? undefined : readPem(o.redisTlsKey, '--redis-tls-key / FLOODGATE_REDIS_TLS_KEY'),
    skipHostnameVerification: o.redisTlsSkipHostnameVerification ?? false,
  }
}

/** The PEM text of the file at `path`, or a clear error naming `option` (missing, unreadable, not PEM). */
export function readPem(path: string, option: string): string {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (error) {
    throw new FloodgateError('INVALID_OPTION', `${option}: cannot read ${path}: ${(error as Error).message}`)
  }
  if (!text.includes('-----BEGIN ')) throw new FloodgateError('INVALID_OPTION', `${option}: ${path} is not a PEM file`)
  return text
}
