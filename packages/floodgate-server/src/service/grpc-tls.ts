// TLS and mTLS on the gRPC port (upstream's GRPC_SERVER_USE_TLS, GRPC_CLIENT_TLS_CACERT, GRPC_CLIENT_TLS_SAN),
// with the certificate, key and CA reloaded when their files change: cert-manager rotates them in place.

import { readFileSync, watch, type FSWatcher } from 'node:fs'
import http2 from 'node:http2'
import { dirname } from 'node:path'
import tls, { type TLSSocket } from 'node:tls'
import type { Logger } from 'pino'

export interface GrpcTlsSettings {
  /** PEM server certificate chain. */
  certFile: string
  /** PEM private key of the certificate. */
  keyFile: string
  /** PEM CA of client certificates: set, a client must present a certificate it signed (mTLS). */
  clientCaFile: string | undefined
  /** Under mTLS, the DNS name a client certificate must carry (as a subjectAltName), as upstream's GRPC_CLIENT_TLS_SAN. */
  clientSan: string | undefined
}

/** Files change in bursts (a rotation writes the certificate, then the key): reload once the burst is over. */
const RELOAD_SETTLE_MS = 100

interface Pem {
  cert: Buffer
  key: Buffer
  ca: Buffer | undefined
}

function readPem(settings: GrpcTlsSettings): Pem {
  return {
    cert: readFileSync(settings.certFile),
    key: readFileSync(settings.keyFile),
    ca: settings.clientCaFile === undefined ? undefined : readFileSync(settings.clientCaFile),
  }
}

/** Throws (a bad PEM, a key that does not match the certificate) before the context is ever used. */
function secureContextOptions(pem: Pem): tls.SecureContextOptions {
  const options: tls.SecureContextOptions = { cert: pem.cert, key: pem.key, ca: pem.ca }
  tls.createSecureContext(options)
  return options
}

/**
 * A TLS http2 server (ALPN h2 only, as gRPC requires) whose context follows the files. The first load
 * throws on bad files, so the service does not start; a later bad rotation is logged and the
 * connections keep the last good context. `close` stops watching.
 */
export function createSecureGrpcServer(
  settings: GrpcTlsSettings,
  http2Options: http2.ServerOptions,
  logger: Logger,
): { server: http2.Http2SecureServer; close: () => void } {
  let pem = readPem(settings)
  const mtls = settings.clientCaFile !== undefined
  const server = http2.createSecureServer({
    ...http2Options,
    ...secureContextOptions(pem),
    ALPNProtocols: ['h2'],
    requestCert: mtls,
    rejectUnauthorized: mtls,
  })
  if (mtls && settings.clientSan !== undefined) refuseOtherSans(server, settings.clientSan, logger)

  let settle: NodeJS.Timeout | undefined
  const reload = () => {
    settle = undefined
    let next: Pem
    let options: tls.SecureContextOptions
    try {
      next = readPem(settings)
      if (next.cert.equals(pem.cert) && next.key.equals(pem.key) && sameCa(next.ca, pem.ca)) return
      options = secureContextOptions(next)
    } catch (error) {
      logger.error(
        { err: error, cert: settings.certFile, key: settings.keyFile },
        'gRPC TLS files changed but do not load: keeping the old ones',
      )
      return
    }
    server.setSecureContext(options)
    pem = next
    logger.info({ cert: settings.certFile, key: settings.keyFile }, 'gRPC TLS certificate reloaded')
  }
  // The directories, not the files: Kubernetes swaps a ..data symlink, which a watch on the file misses.
  const dirs = new Set([settings.certFile, settings.keyFile, settings.clientCaFile].filter((f) => f !== undefined).map((f) => dirname(f)))
  const watchers: FSWatcher[] = [...dirs].map((dir) =>
    watch(dir, () => {
      clearTimeout(settle)
      settle = setTimeout(reload, RELOAD_SETTLE_MS)
      settle.unref()
    }).on('error', (error) => logger.error({ err: error, dir }, 'gRPC TLS: cannot watch the certificate folder')),
  )
  for (const watcher of watchers) watcher.unref()
  return {
    server,
    close: () => {
      clearTimeout(settle)
      for (const watcher of watchers) watcher.close()
    },
  }
}

function sameCa(a: Buffer | undefined, b: Buffer | undefined): boolean {
  return a === undefined || b === undefined ? a === b : a.equals(b)
}

/**
 * Upstream checks that the client certificate is valid for GRPC_CLIENT_TLS_SAN as a DNS name; Node's
 * own hostname check does the same on the peer's subjectAltName. A certificate signed by the CA but
 * for another name is cut before its session serves anything.
 */
function refuseOtherSans(server: http2.Http2SecureServer, san: string, logger: Logger): void {
  server.prependListener('secureConnection', (socket: TLSSocket) => {
    const error = tls.checkServerIdentity(san, socket.getPeerCertificate())
    if (error === undefined) return
    logger.warn({ reason: error.message, remote: socket.remoteAddress }, 'gRPC client certificate refused: wrong subjectAltName')
    socket.destroy()
  })
}
