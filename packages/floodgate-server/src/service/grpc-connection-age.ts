// Upstream's GRPC_MAX_CONNECTION_AGE and _GRACE, as grpc-go's keepalive.ServerParameters: a connection
// gets GOAWAY after its age (±10% jitter), its running calls have the grace to finish, then it is cut.
// Clients reconnect, so load spreads again over instances added since they first connected.

import type { Http2Server, Http2SecureServer, ServerHttp2Session } from 'node:http2'
import type { ShutdownTimers } from './shutdown.js'

export interface ConnectionAgeOptions {
  /** A connection's age before GOAWAY, before jitter. */
  maxAgeMs: number
  /** After the GOAWAY, how long its running calls may take before the connection is cut. */
  graceMs: number
  timers: ShutdownTimers
  /** In [0, 1); tests inject one to fix the jitter. */
  random?: () => number
}

/** ±10%, as grpc-go: connections made together (a deploy, a reconnect storm) do not all go at once. */
const JITTER = 0.1

/** Ages every session `server` opens from now on. */
export function limitConnectionAge(server: Http2Server | Http2SecureServer, options: ConnectionAgeOptions): void {
  const random = options.random ?? Math.random
  const { timers } = options
  server.on('session', (session: ServerHttp2Session) => {
    const age = options.maxAgeMs * (1 - JITTER + 2 * JITTER * random())
    let grace: unknown
    const expire = timers.setTimeout(() => {
      if (session.closed || session.destroyed) return
      // close() sends GOAWAY and lets the session's running streams end; the grace bounds that.
      session.close()
      grace = timers.setTimeout(() => session.destroy(), options.graceMs)
    }, age)
    session.once('close', () => {
      timers.clearTimeout(expire)
      if (grace !== undefined) timers.clearTimeout(grace)
    })
  })
}
