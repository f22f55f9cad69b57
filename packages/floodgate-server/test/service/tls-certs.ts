// Certificates for the gRPC TLS tests, made by openssl in the test: a CA, server certificates and client ones.

import { execFileSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'

/** PEM file paths of one certificate and its key. */
export interface CertFiles {
  cert: string
  key: string
}

function openssl(args: string[]): void {
  execFileSync('openssl', args, { stdio: 'pipe' })
}

/** A self-signed CA in `dir` under `name`. */
export function makeCa(dir: string, name: string): CertFiles {
  const files = { cert: join(dir, `${name}.crt`), key: join(dir, `${name}.key`) }
  openssl(
    ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2'].concat([
      '-keyout',
      files.key,
      '-out',
      files.cert,
      '-subj',
      `/CN=${name}`,
    ]),
  )
  return files
}

/**
 * A certificate signed by `ca`, for `cn` with the DNS names (and IP addresses) of `san`; `usage` is
 * its extendedKeyUsage (serverAuth for a server, clientAuth for a client).
 */
export function makeLeaf(
  dir: string,
  name: string,
  ca: CertFiles,
  cn: string,
  san: string[],
  usage: 'serverAuth' | 'clientAuth',
): CertFiles {
  const files = { cert: join(dir, `${name}.crt`), key: join(dir, `${name}.key`) }
  const csr = join(dir, `${name}.csr`)
  const ext = join(dir, `${name}.ext`)
  writeFileSync(ext, `subjectAltName=${san.join(',')}\nextendedKeyUsage=${usage}\n`)
  openssl([
    'req',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    files.key,
    '-out',
    csr,
    '-subj',
    `/CN=${cn}`,
  ])
  openssl([
    'x509',
    '-req',
    '-in',
    csr,
    '-CA',
    ca.cert,
    '-CAkey',
    ca.key,
    '-CAcreateserial',
    '-out',
    files.cert,
    '-days',
    '2',
    '-extfile',
    ext,
  ])
  return files
}
