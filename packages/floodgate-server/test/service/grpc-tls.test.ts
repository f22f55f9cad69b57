// gRPC over TLS and mTLS (upstream's GRPC_SERVER_USE_TLS, GRPC_CLIENT_TLS_CACERT, GRPC_CLIENT_TLS_SAN), with
// certificates made by openssl here, grpc-js clients, and the certificate files rotated in place.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import tls from 'node:tls'
import * as grpc from '@grpc/grpc-js'
import { pino } from 'pino'
import { loadRlsPackage } from '../../src/service/grpc-server.js'
import { readUpstreamEnvironment } from '../../src/service/upstream-env.js'
import { startTestService, type TestService } from './helpers.js'
import { makeCa, makeLeaf, type CertFiles } from './tls-certs.js'

const REQUEST = { domain: 'test', descriptors: [{ entries: [{ key: 'user', value: 'tls' }] }] }

/** A grpc-js RLS client over TLS trusting `ca`, presenting `client` when given. */
function tlsClient(port: number, ca: CertFiles, client?: CertFiles) {
  const pkg = loadRlsPackage() as any
  const credentials = grpc.credentials.createSsl(
    readFileSync(ca.cert),
    client && readFileSync(client.key),
    client && readFileSync(client.cert),
  )
  const rls = new pkg.envoy.service.ratelimit.v3.RateLimitService(`localhost:${port}`, credentials)
  return {
    shouldRateLimit: (request: unknown) =>
      new Promise<any>((resolve, reject) =>
        rls.ShouldRateLimit(request, (error: Error | null, answer: any) => (error ? reject(error) : resolve(answer))),
      ),
    close: () => rls.close(),
  }
}

/** The CN of the certificate a new TLS connection to the port is served. */
function servedCn(port: number, ca: CertFiles, client?: CertFiles): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({
      host: '127.0.0.1',
      port,
      servername: 'localhost',
      ca: readFileSync(ca.cert),
      ALPNProtocols: ['h2'],
      ...(client && { cert: readFileSync(client.cert), key: readFileSync(client.key) }),
    })
    socket.once('secureConnect', () => {
      const cn = socket.getPeerCertificate().subject.CN
      socket.destroy()
      resolve(String(cn))
    })
    socket.once('error', reject)
  })
}

/** Polls until the served certificate is `cn`: the reload runs on a file watch, on its own time. */
async function waitForServedCn(port: number, ca: CertFiles, cn: string, client?: CertFiles): Promise<void> {
  for (let attempt = 0; attempt < 200; attempt++) {
    if ((await servedCn(port, ca, client)) === cn) return
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  assert.fail(`the server never served ${cn}`)
}

describe('gRPC over TLS and mTLS', () => {
  let dir: string
  let ca: CertFiles
  let otherCa: CertFiles
  let server: CertFiles
  let rotated: CertFiles
  let envoyClient: CertFiles
  let strangerClient: CertFiles
  let foreignClient: CertFiles
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'floodgate-grpc-tls-'))
    ca = makeCa(dir, 'ca')
    otherCa = makeCa(dir, 'other-ca')
    server = makeLeaf(dir, 'server', ca, 'first', ['DNS:localhost', 'IP:127.0.0.1'], 'serverAuth')
    rotated = makeLeaf(dir, 'rotated', ca, 'second', ['DNS:localhost', 'IP:127.0.0.1'], 'serverAuth')
    envoyClient = makeLeaf(dir, 'envoy', ca, 'envoy', ['DNS:envoy.internal'], 'clientAuth')
    strangerClient = makeLeaf(dir, 'stranger', ca, 'stranger', ['DNS:stranger.internal'], 'clientAuth')
    foreignClient = makeLeaf(dir, 'foreign', otherCa, 'envoy', ['DNS:envoy.internal'], 'clientAuth')
  })
  after(() => rmSync(dir, { recursive: true, force: true }))

  /** The service with TLS on copies of the server's files (tests rotate them), and a folder of its own. */
  async function start(extra: string[] = [], logger?: pino.Logger): Promise<{ service: TestService; files: CertFiles }> {
    const live = mkdtempSync(join(dir, 'live-'))
    const files = { cert: join(live, 'tls.crt'), key: join(live, 'tls.key') }
    copyFileSync(server.cert, files.cert)
    copyFileSync(server.key, files.key)
    const args = ['--grpc-tls', '--grpc-tls-cert', files.cert, '--grpc-tls-key', files.key, ...extra]
    const service = await startTestService(undefined, args, logger === undefined ? {} : { logger })
    return { service, files }
  }

  it('serves ShouldRateLimit over TLS, and a plaintext client gets nothing', async () => {
    const { service } = await start()
    const client = tlsClient(service.grpcPort, ca)
    const plain = new (loadRlsPackage() as any).envoy.service.ratelimit.v3.RateLimitService(
      `127.0.0.1:${service.grpcPort}`,
      grpc.credentials.createInsecure(),
    )
    try {
      assert.equal((await client.shouldRateLimit(REQUEST)).overall_code, 'OK')
      const refused = await new Promise<any>((resolve) =>
        plain.ShouldRateLimit(REQUEST, { deadline: Date.now() + 5_000 }, (error: any) => resolve(error)),
      )
      assert.ok(refused, 'a plaintext call must fail on a TLS port')
      assert.notEqual(refused.code, grpc.status.OK)
    } finally {
      client.close()
      plain.close()
      await service.stop()
    }
  })

  it('mTLS: refuses a client without a certificate, or with one of another CA; accepts one the CA signed', async () => {
    const { service } = await start(['--grpc-client-ca', ca.cert])
    const anonymous = tlsClient(service.grpcPort, ca)
    const foreign = tlsClient(service.grpcPort, ca, foreignClient)
    const envoy = tlsClient(service.grpcPort, ca, envoyClient)
    try {
      await assert.rejects(anonymous.shouldRateLimit(REQUEST), (error: any) => error.code === grpc.status.UNAVAILABLE)
      await assert.rejects(foreign.shouldRateLimit(REQUEST), (error: any) => error.code === grpc.status.UNAVAILABLE)
      assert.equal((await envoy.shouldRateLimit(REQUEST)).overall_code, 'OK')
    } finally {
      for (const client of [anonymous, foreign, envoy]) client.close()
      await service.stop()
    }
  })

  it('mTLS with --grpc-client-san: a certificate of the CA for another name is refused', async () => {
    const { service } = await start(['--grpc-client-ca', ca.cert, '--grpc-client-san', 'envoy.internal'])
    const stranger = tlsClient(service.grpcPort, ca, strangerClient)
    const envoy = tlsClient(service.grpcPort, ca, envoyClient)
    try {
      await assert.rejects(stranger.shouldRateLimit(REQUEST), (error: any) => error.code === grpc.status.UNAVAILABLE)
      assert.equal((await envoy.shouldRateLimit(REQUEST)).overall_code, 'OK')
    } finally {
      stranger.close()
      envoy.close()
      await service.stop()
    }
  })

  it('reloads a certificate rotated in place; keeps the old one while the new files do not load', async () => {
    const { service, files } = await start()
    const client = tlsClient(service.grpcPort, ca)
    try {
      assert.equal(await servedCn(service.grpcPort, ca), 'first')
      assert.equal((await client.shouldRateLimit(REQUEST)).overall_code, 'OK')
      // A bad rotation (a key of another certificate): the service keeps serving the old pair.
      copyFileSync(rotated.key, files.key)
      writeFileSync(files.cert, 'not a certificate')
      // Then a good one, as cert-manager writes it: the next new connection gets it.
      copyFileSync(rotated.cert, files.cert)
      await waitForServedCn(service.grpcPort, ca, 'second')
      assert.equal((await client.shouldRateLimit(REQUEST)).overall_code, 'OK')
    } finally {
      client.close()
      await service.stop()
    }
  })

  it('a bad rotation alone is logged and leaves the old certificate served', async () => {
    const lines: string[] = []
    const logged = new Writable({
      write(chunk, _encoding, done) {
        lines.push(String(chunk))
        done()
      },
    })
    const { service, files } = await start([], pino({ level: 'info' }, logged))
    try {
      // A pair that does not match: the certificate of the first, the key of the second.
      copyFileSync(rotated.key, files.key)
      for (let attempt = 0; attempt < 200 && !lines.some((l) => l.includes('do not load')); attempt++)
        await new Promise((resolve) => setTimeout(resolve, 50))
      assert.ok(
        lines.some((l) => l.includes('do not load: keeping the old ones')),
        'the failed reload is logged',
      )
      assert.equal(await servedCn(service.grpcPort, ca), 'first')
    } finally {
      await service.stop()
    }
  })

  it('reads upstream variables: GRPC_SERVER_USE_TLS with its files; the files alone are ignored, as upstream', () => {
    const { env } = readUpstreamEnvironment({
      GRPC_SERVER_USE_TLS: 'true',
      GRPC_SERVER_TLS_CERT: '/tls/tls.crt',
      GRPC_SERVER_TLS_KEY: '/tls/tls.key',
      GRPC_CLIENT_TLS_CACERT: '/tls/ca.crt',
      GRPC_CLIENT_TLS_SAN: 'envoy.internal',
    })
    assert.equal(env.FLOODGATE_GRPC_TLS, 'true')
    assert.equal(env.FLOODGATE_GRPC_TLS_CERT, '/tls/tls.crt')
    assert.equal(env.FLOODGATE_GRPC_TLS_KEY, '/tls/tls.key')
    assert.equal(env.FLOODGATE_GRPC_CLIENT_CA, '/tls/ca.crt')
    assert.equal(env.FLOODGATE_GRPC_CLIENT_SAN, 'envoy.internal')
    const off = readUpstreamEnvironment({ GRPC_SERVER_TLS_CERT: '/tls/tls.crt' })
    assert.equal(off.env.FLOODGATE_GRPC_TLS_CERT, undefined)
    assert.ok(off.notes.some((note) => note.includes('GRPC_SERVER_TLS_CERT is ignored')))
  })

  it('refuses --grpc-tls without a certificate and key, and a client CA without --grpc-tls', async () => {
    await assert.rejects(startTestService(undefined, ['--grpc-tls']), /grpc-tls-cert/)
    await assert.rejects(startTestService(undefined, ['--grpc-client-ca', ca.cert]), /only applies with --grpc-tls/)
  })
})
