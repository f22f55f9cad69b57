// Certificates for the Redis TLS tests, made by openssl in a temporary folder: a CA, what it signs, and a second CA.

import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/** Paths of PEM files; `<name>.crt` and `<name>.key` each. */
export interface TestCerts {
  dir: string
  /** The CA that signs everything below. */
  ca: string
  /** Another CA, which signed none of them. */
  otherCa: string
  /** Server certificate for 127.0.0.1 and localhost. */
  server: { cert: string; key: string }
  /** Server certificate for redis.other.example only. */
  otherName: { cert: string; key: string }
  /** Client certificate for `tls-auth-clients yes`. */
  client: { cert: string; key: string }
  remove(): void
}

const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']

/** Makes the certificates with openssl (P-256 keys: quick to make). */
export function makeTestCerts(): TestCerts {
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-redis-tls-'))
  const at = (name: string) => join(dir, name)
  const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] })
  const ca = (name: string) =>
    openssl('req', '-x509', ...EC, '-keyout', `${name}.key`, '-out', `${name}.crt`, '-days', '2', '-subj', `/CN=Floodgate test ${name}`)
  const signed = (name: string, subjectAltName: string | undefined) => {
    openssl('req', ...EC, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`)
    const ext = subjectAltName === undefined ? [] : ['-extfile', `${name}.ext`]
    if (subjectAltName !== undefined) writeFileSync(at(`${name}.ext`), `subjectAltName=${subjectAltName}\n`)
    openssl(
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      'ca.crt',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-out',
      `${name}.crt`,
      '-days',
      '2',
      ...ext,
    )
    return { cert: at(`${name}.crt`), key: at(`${name}.key`) }
  }
  ca('ca')
  ca('other-ca')
  return {
    dir,
    ca: at('ca.crt'),
    otherCa: at('other-ca.crt'),
    server: signed('server', 'IP:127.0.0.1,DNS:localhost'),
    otherName: signed('other-name', 'DNS:redis.other.example'),
    client: signed('client', undefined),
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
