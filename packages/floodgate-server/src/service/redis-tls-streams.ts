// Keeps a failing TLS connection to Redis from crashing the service (ioredis listens once for a stream's error, and TLS
// can report two), and hands each stream's first error to the service's report (a Cluster would hide it).

import { createRequire } from 'node:module'
import type { RedisConnectOptions } from './redis-connection.js'

/** ioredis's connector classes, as far as this file extends them. */
type ConnectorClass = new (
  options: object,
) => {
  connect(...args: unknown[]): Promise<{
    on(event: 'error', listener: (error: Error) => void): unknown
    once(event: 'error', listener: (error: Error) => void): unknown
  }>
}

const requireHere = createRequire(import.meta.url)

/**
 * The connector with a lasting 'error' listener on each stream it opens. A refused handshake can
 * emit two errors on one TLS socket (the alert, then the write it cut short); ioredis handles the
 * first (it reports it and reconnects) with `once` listeners, so the second would be thrown as an
 * uncaught exception. The extra listener only keeps that echo of the same failure.
 *
 * The first error also goes to `heard`: a Cluster asks for its slots on a copy of a node's
 * connection whose errors it drops, and reports only "Connection is closed.", so a refused
 * certificate (every node refusing it) would never be named otherwise.
 */
function steady(base: ConnectorClass, heard: (error: Error) => void): ConnectorClass {
  return class SteadyTlsConnector extends base {
    override async connect(...args: unknown[]) {
      const stream = await super.connect(...args)
      stream.once('error', heard)
      stream.on('error', ignore)
      return stream
    }
  }
}

function ignore(): void {}

/**
 * `connect` with ioredis's connector made steady wherever it opens TLS streams (loaded here, on
 * first use: the embedded mode never loads ioredis), each stream's first error going to `heard`.
 * Plain TCP and sockets are left as they are.
 */
export function withSteadyTls(connect: RedisConnectOptions, heard: (error: Error) => void = ignore): RedisConnectOptions {
  const redis = connect.redis
  const nodes = connect.clusterOptions?.redisOptions
  if (redis?.tls === undefined && nodes?.tls === undefined) return connect
  const { SentinelConnector } = requireHere('ioredis') as { SentinelConnector: ConnectorClass }
  // Not exported by ioredis's index; the class every non-Sentinel client uses (ioredis 5 and 6).
  const standalone = (requireHere('ioredis/built/connectors/StandaloneConnector.js') as { default: ConnectorClass }).default
  if (nodes?.tls !== undefined) {
    return { ...connect, clusterOptions: { ...connect.clusterOptions, redisOptions: { ...nodes, Connector: steady(standalone, heard) } } }
  }
  const Connector = steady(redis?.sentinels !== undefined ? SentinelConnector : standalone, heard)
  return { ...connect, redis: { ...redis, Connector } }
}
