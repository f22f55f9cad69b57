// Settings of `floodgate serve` that bound slow clients, connection floods and memory.
// Their flags are in serve-options.ts; settings-schema.ts spreads these readers in.

import { count, durationMs } from './setting-values.js'

/** Bounds that keep slow or abusive clients from holding sockets or memory; production defaults. */
export interface AbuseBounds {
  /** A request's head and body must arrive within this, else 408 and the socket closes (default 10s). */
  requestTimeoutMs: number
  /** A socket silent this long while a request is open closes, e.g. a client that stops reading (default 60s). */
  connectionTimeoutMs: number
  /** An idle keep-alive socket closes after this (default 72s: longer than the usual 60s of load balancers, so they close first). */
  keepAliveTimeoutMs: number
  /** Most HTTP sockets open at once; past it new connections are refused (default 10000). */
  maxConnections: number
  /** Embedded store: most keys kept (default 100000); see MemoryStore's maxKeys. */
  memoryMaxKeys: number
  /** Embedded store: most bytes its keys may count for (default 64 MiB); see MemoryStore's maxBytes. */
  memoryMaxBytes: number
}

export function abuseBoundFields() {
  return {
    // durationMs refuses 0 (parseDuration does): a timeout of 0 would mean none at all in Node.
    requestTimeout: durationMs(10_000),
    connectionTimeout: durationMs(60_000),
    keepAliveTimeout: durationMs(72_000),
    maxConnections: count(10_000),
    memoryMaxKeys: count(100_000),
    memoryMaxBytes: count(64 * 1024 * 1024),
  }
}

export function abuseBounds(o: {
  requestTimeout: number
  connectionTimeout: number
  keepAliveTimeout: number
  maxConnections: number
  memoryMaxKeys: number
  memoryMaxBytes: number
}): AbuseBounds {
  return {
    requestTimeoutMs: o.requestTimeout,
    connectionTimeoutMs: o.connectionTimeout,
    keepAliveTimeoutMs: o.keepAliveTimeout,
    maxConnections: o.maxConnections,
    memoryMaxKeys: o.memoryMaxKeys,
    memoryMaxBytes: o.memoryMaxBytes,
  }
}
