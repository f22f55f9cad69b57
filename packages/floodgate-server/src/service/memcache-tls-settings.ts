// Settings of `floodgate serve` for TLS to memcached (upstream's MEMCACHE_TLS*). Flags: MEMCACHE_TLS_OPTIONS in memcache-options.ts.

import type { MemcachedTlsOptions } from 'floodgate/memcached'
import { rootCertificates } from 'node:tls'
import { z } from 'zod'
import { readPem } from './redis-tls-settings.js'

/** The zod fields of these options, spread into the settings schema. */
export function memcacheTlsFields() {
  return {
    memcacheTls: z.boolean().optional(),
    memcacheTlsCa: z.string().min(1).optional(),
    memcacheTlsCert: z.string().min(1).optional(),
    memcacheTlsKey: z.string().min(1).optional(),
    memcacheTlsSkipHostnameVerification: z.boolean().optional(),
  }
}

interface Raw {
  memcacheTls?: boolean
  memcacheTlsCa?: string
  memcacheTlsCert?: string
  memcacheTlsKey?: string
  memcacheTlsSkipHostnameVerification?: boolean
  memcached?: unknown
  memcacheSrv?: string
}

/**
 * What does not go together, each with its reason (called from the schema's superRefine). A TLS file
 * given without --memcache-tls is reported, not ignored: the user believes it is in force.
 */
export function memcacheTlsIssues(o: Raw, issue: (path: string, message: string) => void): void {
  if ((o.memcacheTlsCert === undefined) !== (o.memcacheTlsKey === undefined)) {
    issue(
      o.memcacheTlsCert === undefined ? 'memcacheTlsKey' : 'memcacheTlsCert',
      'give --memcache-tls-cert and --memcache-tls-key together',
    )
  }
  if (o.memcacheTls && o.memcached === undefined && o.memcacheSrv === undefined) {
    issue('memcacheTls', 'applies to memcached: add --memcached or --memcache-srv')
  }
  const file = (['memcacheTlsCa', 'memcacheTlsCert', 'memcacheTlsSkipHostnameVerification'] as const).find(
    (name) => o[name] !== undefined && o[name] !== false,
  )
  if (file !== undefined && !o.memcacheTls) issue(file, 'only applies with --memcache-tls (MEMCACHE_TLS=true)')
}

/**
 * The store's `tls` option, with the files read now (a missing one stops the start with its name), or
 * undefined without --memcache-tls. As upstream (src/memcached/cache_impl.go), the CA is trusted
 * besides the system's roots, and skipping hostname verification still verifies the chain.
 */
export function memcacheTlsSettings(o: Raw): MemcachedTlsOptions | undefined {
  if (!o.memcacheTls) return undefined
  const ca = o.memcacheTlsCa === undefined ? undefined : readPem(o.memcacheTlsCa, '--memcache-tls-ca / MEMCACHE_TLS_CACERT')
  return {
    ...(ca !== undefined && { ca: [...rootCertificates, ca] }),
    ...(o.memcacheTlsCert !== undefined && { cert: readPem(o.memcacheTlsCert, '--memcache-tls-cert / MEMCACHE_TLS_CLIENT_CERT') }),
    ...(o.memcacheTlsKey !== undefined && { key: readPem(o.memcacheTlsKey, '--memcache-tls-key / MEMCACHE_TLS_CLIENT_KEY') }),
    ...(o.memcacheTlsSkipHostnameVerification && { checkServerIdentity: () => undefined }),
  }
}

/** `{ tls }` for the memcached store settings with --memcache-tls, else nothing (the settings then have no `tls` key). */
export function memcacheTls(o: Raw): { tls?: MemcachedTlsOptions } {
  const tls = memcacheTlsSettings(o)
  return tls === undefined ? {} : { tls }
}
