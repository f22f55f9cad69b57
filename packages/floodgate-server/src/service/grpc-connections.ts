// The gRPC port's connections, bounded: a cap that sheds the longest idle connection, a deadline for the
// HTTP/2 preface, an idle timeout, and grpc-go's keepalive enforcement (too many pings end a connection).
// Plaintext sockets are counted from their accept, before their session (grpc-preface.ts holds them).

import http2, { type Http2SecureServer, type Http2Server, type ServerHttp2Session, type ServerHttp2Stream } from 'node:http2'
import type { Socket } from 'node:net'
import { AddressCounts } from './address-counts.js'

export interface GrpcConnectionLimits {
  /** Most connections at once; past it the longest idle one is shed (the newcomer itself when none is idle). */
  maxConnections: number
  /** A connection with no call in flight this long gets GOAWAY and closes. */
  idleTimeoutMs: number
  /** A connection must send the HTTP/2 preface and its SETTINGS within this, else it is cut. */
  handshakeTimeoutMs: number
  /** Client pings closer together than this are strikes; the third ends the connection (GOAWAY too_many_pings). */
  keepaliveMinTimeMs: number
  /** Most connections a sweep ends in one event-loop turn; the rest wait for the next turns (default CLOSE_BATCH). */
  closeBatch?: number
}

/**
 * Connections a sweep ends per event-loop turn by default. Closing a socket costs tens of µs of the loop
 * (more on a loaded machine): thousands of flood sockets reaching their deadline together would block
 * every call for hundreds of ms, where batches let the calls' I/O run between them.
 */
export const CLOSE_BATCH = 64

/** Why connections were closed by the server, counted for /metrics. */
export interface ShedCounts {
  /** Shed at the cap for a newer connection (or the newcomer refused, with none idle). */
  cap: number
  /** No call for --grpc-idle-timeout. */
  idle: number
  /** No HTTP/2 preface within --grpc-handshake-timeout. */
  handshake: number
  /** Pinged more often than --grpc-keepalive-min-time allows. */
  keepalive: number
}

interface Connection {
  readonly session: ServerHttp2Session
  /** The TCP socket itself: a session's own `socket` is a proxy that refuses to be destroyed. */
  readonly socket: Socket | undefined
  /** The client's address, as counted in the per-address counts. */
  readonly address: string
  /** Calls in flight. */
  streams: number
  /** performance.now() of the connect (pending), of the last call's end (idle), or of the GOAWAY (closing). */
  since: number
  lastPing: number
  strikes: number
}

/** Pings too close together tolerated before the connection ends, as grpc-go's enforcement (the third strike ends it). */
const MAX_PING_STRIKES = 2

/** A connection told to go (GOAWAY) that has not closed after this is cut: a client that never reads holds its socket. */
const CLOSE_GRACE_MS = 1_000

const TOO_MANY_PINGS = Buffer.from('too_many_pings')

/** A plaintext socket still to send the HTTP/2 preface: no session yet. */
interface Unopened {
  readonly socket: Socket
  readonly address: string
  /** performance.now() of the accept. */
  readonly since: number
}

/**
 * Tracks every session of an http2 server, and the plaintext sockets not yet sessions. Four queues,
 * each in the order its deadline runs (Maps keep insertion order): sockets still to send the preface,
 * sessions still to send their SETTINGS, idle ones (no call in flight) by when they fell idle, and ones
 * told to go. A sweep every quarter of the shortest timeout (10 ms to 1 s) ends what is due, so a
 * call costs two Map operations, never a timer.
 */
export class GrpcConnections {
  readonly #limits: GrpcConnectionLimits
  readonly #all = new Map<ServerHttp2Session, Connection>()
  readonly #unopened = new Map<Socket, Unopened>()
  readonly #pending = new Map<ServerHttp2Session, Connection>()
  readonly #idle = new Map<ServerHttp2Session, Connection>()
  readonly #closing = new Map<ServerHttp2Session, Connection>()
  readonly #sweeper: NodeJS.Timeout
  readonly #closeBatch: number
  /** The rest of a sweep that hit its batch, set to run in the next turn (once: later sweeps join it). */
  #continuation: NodeJS.Immediate | undefined
  // Open connections per client address: at the cap the shed falls on an address holding more than its share.
  readonly #perAddress = new AddressCounts()
  readonly shed: ShedCounts = { cap: 0, idle: 0, handshake: 0, keepalive: 0 }

  /** Tracks `server`'s connections from now on; a TLS server makes its sessions on 'secureConnection'. */
  constructor(server: Http2Server | Http2SecureServer, limits: GrpcConnectionLimits, connectionEvent = 'connection') {
    this.#limits = limits
    // At least one, or a sweep would reschedule itself forever closing nothing.
    this.#closeBatch = Math.max(1, limits.closeBatch ?? CLOSE_BATCH)
    // http2 makes a connection's session and emits 'session' synchronously inside its own 'connection'
    // listener: one put first sees the socket just before its session.
    let arriving: Socket | undefined
    server.prependListener(connectionEvent, (socket: Socket) => {
      arriving = socket
    })
    server.on('session', (session) => {
      this.#add(session, arriving)
      arriving = undefined
    })
    const tick = Math.max(10, Math.min(1_000, Math.floor(Math.min(limits.idleTimeoutMs, limits.handshakeTimeoutMs) / 4)))
    this.#sweeper = setInterval(() => this.sweep(performance.now()), tick)
    this.#sweeper.unref()
  }

  /** Connections open now. */
  get size(): number {
    return this.#all.size + this.#unopened.size
  }

  /**
   * A plaintext socket just accepted, held until it sends the preface: counted toward the cap (and the
   * cap kept), cut at the handshake deadline. Its session, once made, takes its place.
   */
  accepted(socket: Socket): void {
    const unopened: Unopened = { socket, address: this.#perAddress.add(socket.remoteAddress), since: performance.now() }
    this.#unopened.set(socket, unopened)
    socket.once('close', () => {
      if (this.#unopened.delete(socket)) this.#perAddress.remove(unopened.address)
    })
    if (this.size > this.#limits.maxConnections) this.#shedOne(socket)
  }

  /** A new session (a TCP connection; http2 makes its session at once): tracked, and the cap kept. */
  #add(session: ServerHttp2Session, socket: Socket | undefined): void {
    const unopened = socket === undefined ? undefined : this.#unopened.get(socket)
    if (unopened !== undefined) this.#unopened.delete(unopened.socket)
    // A socket held for its preface keeps its count, and its handshake deadline runs from its accept.
    const address = unopened?.address ?? this.#perAddress.add(socket?.remoteAddress)
    const since = unopened?.since ?? performance.now()
    const connection: Connection = { session, socket, address, streams: 0, since, lastPing: Number.NEGATIVE_INFINITY, strikes: 0 }
    this.#all.set(session, connection)
    this.#pending.set(session, connection)
    session.once('remoteSettings', () => {
      if (this.#pending.delete(session) && connection.streams === 0) {
        connection.since = performance.now()
        this.#idle.set(session, connection)
      }
    })
    session.on('ping', () => this.#pinged(connection))
    session.once('close', () => this.#forget(session))
    if (unopened === undefined && this.size > this.#limits.maxConnections) this.#shedOne(session)
  }

  /** A call started on its session: the connection is busy until the call's stream closes. */
  streamStarted(stream: ServerHttp2Stream): void {
    const connection = this.#all.get(stream.session as ServerHttp2Session)
    if (connection === undefined) return
    if (connection.streams++ === 0) {
      this.#idle.delete(connection.session)
      // A stream means the preface and SETTINGS came (remoteSettings may not have fired yet).
      this.#pending.delete(connection.session)
    }
    // As grpc-go: calls reset the ping strikes.
    connection.strikes = 0
    stream.once('close', () => {
      if (--connection.streams > 0 || !this.#all.has(connection.session) || this.#closing.has(connection.session)) return
      connection.since = performance.now()
      this.#idle.set(connection.session, connection)
    })
  }

  /**
   * Ends what is due at `now` (performance.now()), at most `closeBatch` connections in this turn; what is
   * left is ended in the next turns, as of the same `now`. Runs on its own timer, and tests may call it.
   */
  sweep(now: number): void {
    if (this.#continuation !== undefined) return
    const { idleTimeoutMs, handshakeTimeoutMs } = this.#limits
    let budget = this.#closeBatch
    for (const unopened of this.#unopened.values()) {
      if (budget === 0 || now - unopened.since < handshakeTimeoutMs) break
      budget--
      this.shed.handshake++
      this.#drop(unopened)
    }
    for (const connection of this.#pending.values()) {
      if (budget === 0 || now - connection.since < handshakeTimeoutMs) break
      budget--
      this.shed.handshake++
      this.#cut(connection)
    }
    for (const connection of this.#idle.values()) {
      if (budget === 0 || now - connection.since < idleTimeoutMs) break
      budget--
      this.shed.idle++
      this.#goAway(connection)
    }
    for (const connection of this.#closing.values()) {
      if (budget === 0 || now - connection.since < CLOSE_GRACE_MS) break
      budget--
      this.#cut(connection)
    }
    if (budget > 0) return
    // setImmediate runs after the I/O this turn polled, so calls are read and answered between batches.
    this.#continuation = setImmediate(() => {
      this.#continuation = undefined
      this.sweep(now)
    })
  }

  /** Stops the sweeps (the server is closing; its shutdown ends the sessions). */
  stop(): void {
    clearInterval(this.#sweeper)
    if (this.#continuation !== undefined) clearImmediate(this.#continuation)
    this.#continuation = undefined
  }

  /**
   * Over the cap: a socket that never sent its preface (no session: the cheapest to lose, and the
   * likeliest hostile), else a session that never sent its SETTINGS, oldest first (other than the one
   * just come), else the one idle longest, else the newcomer itself. A call in flight is never cut.
   * Those of an address holding more than its share go first: one flooding address sheds its own
   * connections, not a legitimate client's older idle one.
   */
  #shedOne(newcomer: ServerHttp2Session | Socket): void {
    this.shed.cap++
    const heavy = (connection: { address: string }) => this.#perAddress.overShare(connection.address)
    let unopened: Unopened | undefined
    for (const candidate of this.#unopened.values()) {
      if (candidate.socket === newcomer) continue
      if (heavy(candidate)) return this.#drop(candidate)
      unopened ??= candidate
    }
    let pending: Connection | undefined
    for (const connection of this.#pending.values()) {
      if (connection.session === newcomer) continue
      if (heavy(connection)) return this.#cut(connection)
      pending ??= connection
    }
    let idle: Connection | undefined
    for (const connection of this.#idle.values()) {
      if (heavy(connection)) return this.#goAway(connection)
      idle ??= connection
    }
    if (unopened !== undefined) return this.#drop(unopened)
    if (pending !== undefined) return this.#cut(pending)
    if (idle !== undefined) return this.#goAway(idle)
    const held = this.#unopened.get(newcomer as Socket)
    if (held !== undefined) return this.#drop(held)
    const connection = this.#all.get(newcomer as ServerHttp2Session)
    if (connection !== undefined) this.#cut(connection)
  }

  /** Cuts a socket held for its preface (it has no session to close). */
  #drop(unopened: Unopened): void {
    this.#unopened.delete(unopened.socket)
    this.#perAddress.remove(unopened.address)
    unopened.socket.destroy()
  }

  /** grpc-go's enforcement: a ping within the minimum time of the last one is a strike; the third ends the connection. */
  #pinged(connection: Connection): void {
    const now = performance.now()
    if (now - connection.lastPing < this.#limits.keepaliveMinTimeMs) connection.strikes++
    connection.lastPing = now
    if (connection.strikes <= MAX_PING_STRIKES || this.#closing.has(connection.session)) return
    this.shed.keepalive++
    const session = connection.session
    if (!session.destroyed) {
      // ENHANCE_YOUR_CALM with "too_many_pings", as grpc-go: gRPC clients then ping less often.
      session.goaway(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM, session.state.lastProcStreamID ?? 0, TOO_MANY_PINGS)
    }
    this.#goAway(connection)
  }

  /** GOAWAY: no new calls; running ones finish; the socket is cut if it is still open after a grace. */
  #goAway(connection: Connection): void {
    const session = connection.session
    this.#pending.delete(session)
    this.#idle.delete(session)
    connection.since = performance.now()
    this.#closing.set(session, connection)
    if (!session.closed) session.close()
  }

  /** Cuts the connection at once (nothing runs on it, or it outstayed its grace). */
  #cut(connection: Connection): void {
    const session = connection.session
    this.#forget(session)
    // The session alone would wait for its socket's writes to flush, which a client that never reads never lets happen.
    session.destroy()
    connection.socket?.destroy()
  }

  #forget(session: ServerHttp2Session): void {
    const connection = this.#all.get(session)
    if (connection !== undefined) this.#perAddress.remove(connection.address)
    this.#all.delete(session)
    this.#pending.delete(session)
    this.#idle.delete(session)
    this.#closing.delete(session)
  }
}
