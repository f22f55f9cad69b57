// memjs connections over TLS: memjs's Server with its socket opened by tls.connect, for MemcachedStore's `tls` option.

import { connect, type ConnectionOptions, type TLSSocket } from 'node:tls'
import { FloodgateError } from '../../core/errors.js'

/**
 * TLS to memcached (memcached 1.5.13+ started with `-Z`): Node's `tls.connect` options, of which the
 * store uses `ca` (trusted besides Node's roots when given with them, else instead of them), `cert` and
 * `key` (a client certificate, for `ssl_verify_mode` 2 or 3), `servername`, `checkServerIdentity`
 * (`() => undefined` checks the chain but not the name) and the protocol and cipher settings.
 * `host` and `port` come from each server's `host:port`.
 */
export type MemcachedTlsOptions = Omit<ConnectionOptions, 'host' | 'port' | 'path' | 'socket'>

/** The fields and methods of memjs's `Server` that a TLS connection drives (memjs/lib/memjs/server.js). */
interface MemjsServerInternals {
  host: string
  port: number
  username?: string
  password?: string
  options: { conntimeout: number; keepAlive: boolean; keepAliveDelay: number }
  connected: boolean
  timeoutSet: boolean
  connectCallbacks: Array<(socket: TLSSocket) => void>
  _socket?: TLSSocket
  sock(sasl: boolean, go: (socket: TLSSocket) => void): void
  responseHandler(data: Buffer): void
  error(error: Error): void
  listSasl(): void
  once(event: 'authenticated', listener: () => void): void
  emit(event: 'authenticated'): boolean
  close(): void
}

type ServerConstructor = new (
  host: string,
  port: number,
  username: string | undefined,
  password: string | undefined,
  options: object,
) => MemjsServerInternals

/** A memjs `Server` as the pool makes it: where it connects, and how. */
export interface PlainServer {
  host: string
  port: number
  username?: string
  password?: string
  options: object
}

/**
 * Makes the TLS twin of a memjs `Server` made for plain TCP. memjs's Server calls `net.connect`
 * itself and has no TLS; the twin opens its socket with `tls.connect` before memjs's `sock` looks
 * for one, so memjs finds a connecting socket and queues its requests until the handshake (and
 * SASL, when a username is set) is done. Everything else (framing, timeouts, errors) stays memjs's.
 */
export function tlsServerMaker(Server: ServerConstructor, tls: MemcachedTlsOptions): (plain: PlainServer) => MemjsServerInternals {
  class TlsServer extends Server {
    override sock(sasl: boolean, go: (socket: TLSSocket) => void): void {
      if (this._socket === undefined) this.open()
      super.sock(sasl, go)
    }

    private open(): void {
      const socket = connect({ ...tls, host: this.host, port: this.port })
      this._socket = socket
      this.connected = false
      socket.once('secureConnect', () => {
        this.once('authenticated', () => {
          if (this._socket !== socket) return
          this.connected = true
          // The connect timeout is done with; memjs sets the request timeouts on this socket from here.
          socket.setTimeout(0)
          this.timeoutSet = false
          const waiting = this.connectCallbacks
          this.connectCallbacks = []
          for (const go of waiting) go(socket)
        })
        if (this.username && this.password) this.listSasl()
        else this.emit('authenticated')
      })
      socket.on('data', (data: Buffer) => this.responseHandler(data))
      socket.on('error', (error: Error) => {
        if (this._socket === socket) this.error(explain(error, this.host, this.port, tls))
      })
      socket.on('close', () => {
        if (this._socket !== socket) return
        this.connected = false
        this.timeoutSet = false
        this._socket = undefined
      })
      this.timeoutSet = true
      socket.setTimeout(this.options.conntimeout * 1000, () => {
        if (this.connected || this._socket !== socket) return
        socket.destroy()
        this._socket = undefined
        this.error(new Error(`memcached ${this.host}:${this.port}: TLS connection timed out before its handshake was done`))
      })
      socket.setKeepAlive(this.options.keepAlive, this.options.keepAliveDelay * 1000)
    }
  }
  return (plain) => new TlsServer(plain.host, plain.port, plain.username, plain.password, plain.options)
}

/**
 * For a memjs client of your own over TLS: maps the `servers` of `memjs.Client.create(list, options)`
 * to their TLS twins, to pass to `new memjs.Client(servers, options)` in the same order.
 * `memjs` is the memjs module.
 */
export function memjsTlsServers(memjs: { Server: unknown }, tls: MemcachedTlsOptions): (server: unknown) => unknown {
  const toTls = tlsServerMaker(memjs.Server as ServerConstructor, tls)
  return (server) => toTls(server as PlainServer)
}

/** The error of a TLS connection, with what it means for the user when its code tells (memjs passes on the message). */
function explain(error: Error & { code?: string }, host: string, port: number, tls: MemcachedTlsOptions): Error {
  const hint = hintFor(error.code ?? '', tls)
  const explained = new Error(`memcached ${host}:${port} over TLS: ${error.message}${hint === undefined ? '' : `: ${hint}`}`, {
    cause: error,
  })
  return Object.assign(explained, { code: error.code })
}

function hintFor(code: string, tls: MemcachedTlsOptions): string | undefined {
  // Under TLS 1.3 a server that requires a client certificate checks it after the client's side of
  // the handshake is done: a client without one sees the connection reset, not an alert.
  if ((tls.cert === undefined && /ECONNRESET|EPIPE/.test(code)) || /CERTIFICATE_REQUIRED|ALERT_BAD_CERTIFICATE|ALERT_UNKNOWN_CA/.test(code))
    return 'memcached requires a client certificate its CA signed (tls.cert and tls.key)'
  if (/UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED_CERT|UNABLE_TO_GET_ISSUER_CERT|CERT_SIGNATURE_FAILURE|CERT_UNTRUSTED/.test(code))
    return "memcached's certificate is not signed by a trusted CA: give that CA (tls.ca)"
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID')
    return "memcached's certificate is for another name: connect by a name it holds, or give tls.servername or checkServerIdentity"
  if (/WRONG_VERSION_NUMBER|PACKET_LENGTH_TOO_LONG|ECONNRESET/.test(code)) return 'is memcached serving TLS (memcached -Z)?'
  return undefined
}

/** Checks the store's `tls` option: an object of tls.connect options, or undefined. */
export function checkTlsOption(tls: unknown): MemcachedTlsOptions | undefined {
  if (tls === undefined) return undefined
  if (tls === null || typeof tls !== 'object' || Array.isArray(tls)) {
    throw new FloodgateError('INVALID_OPTION', 'MemcachedStore tls: expected an object of tls.connect options, e.g. { ca, cert, key }')
  }
  const given = tls as ConnectionOptions
  if ((given.cert === undefined) !== (given.key === undefined) && given.pfx === undefined) {
    throw new FloodgateError('INVALID_OPTION', 'MemcachedStore tls: give cert and key together (a client certificate and its key)')
  }
  return given
}
