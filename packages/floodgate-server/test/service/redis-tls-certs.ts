// Certificates for the Redis TLS tests, made by openssl in a temporary folder: a CA, what it signs, and a second CA.

import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type CertFiles, makeCa, makeLeaf } from './tls-certs.js'

/** Paths of PEM files; `<name>.crt` and `<name>.key` each. */
export interface TestCerts {
  dir: string
  /** The CA that signs everything below. */
  ca: string
  /** Another CA, which signed none of them. */
  otherCa: string
  /** Server certificate for 127.0.0.1 and localhost. */
  server: CertFiles
  /** Server certificate for redis.other.example only. */
  otherName: CertFiles
  /** Client certificate for `tls-auth-clients yes`. */
  client: CertFiles
  remove(): void
}

/** Makes the certificates with openssl (P-256 keys: quick to make). */
export function makeTestCerts(): TestCerts {
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-redis-tls-'))
  const ca = makeCa(dir, 'ca')
  return {
    dir,
    ca: ca.cert,
    otherCa: makeCa(dir, 'other-ca').cert,
    server: makeLeaf(dir, 'server', ca, 'server', ['IP:127.0.0.1', 'DNS:localhost'], 'serverAuth'),
    otherName: makeLeaf(dir, 'other-name', ca, 'other-name', ['DNS:redis.other.example'], 'serverAuth'),
    client: makeLeaf(dir, 'client', ca, 'client', ['DNS:floodgate.client'], 'clientAuth'),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  }
}

/** redis-server arguments serving TLS only on `port` with `server` (and its CA, to check clients against). */
export function tlsServerArgs(certs: TestCerts, port: number, server = certs.server, authClients = true): string[] {
  return [
    ...['--port', '0', '--tls-port', String(port)],
    ...['--tls-cert-file', server.cert, '--tls-key-file', server.key, '--tls-ca-cert-file', certs.ca],
    ...['--tls-auth-clients', authClients ? 'yes' : 'no'],
  ]
}
