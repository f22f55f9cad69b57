// Creates the server pool of a MemcachedStore given { servers }: the app's memjs, keys placed by the store's hash ring.

import { createRequire } from 'node:module'
import { FloodgateError } from '../../core/errors.js'
import type { MemjsClientLike } from './protocol.js'
import { ServerPool, type MemjsModule, type MemjsServer } from './server-pool.js'
import { type MemcachedTlsOptions, type PlainServer, tlsServerMaker } from './tls-server.js'

/** Loads memjs, or undefined when the app does not have it. */
export type MemjsLoader = () => unknown

const requireFromHere = createRequire(import.meta.url)

function loadMemjs(): unknown {
  try {
    return requireFromHere('memjs')
  } catch (error) {
    if ((error as { code?: unknown }).code === 'MODULE_NOT_FOUND' && String((error as Error).message).includes("'memjs'")) return undefined
    throw error
  }
}

/**
 * Defaults for a client the store creates: no retry inside memjs (the limiter has its own timeout
 * and breaker, and a retried increment could count twice), no failover to another server (that
 * would split a key's counter in two), and no log line per failed request (the limiter reports outages).
 * memjs's own timeout (seconds) lies past the limiter's longest wait (2 s by default): the limiter
 * tells a slow server from a dead one, and memjs timing out first — failing every request in flight
 * on that connection — turned a slow but healthy server into an outage (issue 26 §3).
 */
const MEMJS_DEFAULTS = { retries: 1, failover: false, timeout: 5, logger: { log: () => {} } }

/**
 * The server pool of a store made from `servers` (`host:port` each), with `memjs` as extra options
 * for its clients, over TLS with `tls`. Each list's client places a record by its user key's route on the list's
 * consistent-hash ring (HashRing.serverOfRecord), memjs's documented way to choose how keys are
 * spread; `build` makes what the store runs on each list's client.
 */
export function createServerPool<T>(
  servers: readonly string[],
  memjs: object | undefined,
  build: (client: MemjsClientLike) => T,
  tls: MemcachedTlsOptions | undefined = undefined,
  load: MemjsLoader = loadMemjs,
): ServerPool<T> {
  const module = load() as MemjsModule | undefined
  if (module === undefined) {
    throw new FloodgateError('INVALID_OPTION', 'MemcachedStore servers: install the memcached client: npm i memjs (or pass { client })')
  }
  const options = { ...MEMJS_DEFAULTS, ...memjs }
  if (tls === undefined) return new ServerPool(servers, module, options, build)
  const toTls = tlsServerMaker(module.Server as unknown as Parameters<typeof tlsServerMaker>[0], tls)
  return new ServerPool(servers, module, options, build, (server) => toTls(server as unknown as PlainServer) as unknown as MemjsServer)
}

/** Checks a server list: `host:port` strings (or one comma-separated string), at least one, no repeats. */
export function parseServers(servers: unknown): string[] {
  const list = typeof servers === 'string' ? servers.split(',').map((part) => part.trim()) : servers
  if (!Array.isArray(list) || list.length === 0) {
    throw new FloodgateError(
      'INVALID_OPTION',
      `MemcachedStore servers: expected host:port strings like ['10.0.0.1:11211'], got ${JSON.stringify(servers)}`,
    )
  }
  for (const server of list) {
    if (typeof server !== 'string' || !/^[^\s:,@]+:\d{1,5}$/.test(server) || Number(server.split(':')[1]) > 65535) {
      const problem = `${JSON.stringify(server)} is not host:port, e.g. '127.0.0.1:11211'`
      throw new FloodgateError('INVALID_OPTION', `MemcachedStore servers: ${problem}`)
    }
  }
  if (new Set(list).size !== list.length) throw new FloodgateError('INVALID_OPTION', 'MemcachedStore servers: a server is listed twice')
  return list as string[]
}
