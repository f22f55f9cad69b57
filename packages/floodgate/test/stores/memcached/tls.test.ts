// MemcachedStore's `tls` option on real memcached servers started with -Z, with certificates made by openssl in the test:
// decisions over TLS, a server certificate from an untrusted CA or without a client certificate refused with the reason.

import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { createPolicies } from '../../../src/core/policy.js'
import { FloodgateError } from '../../../src/core/errors.js'
import { MemcachedStore, type MemcachedTlsOptions } from '../../../src/memcached.js'
import { startMemcached, type MemcachedProcess } from '../../support/memcached-server.js'
// The service's test certificate maker (openssl in a temporary folder), shared rather than written twice.
import { makeTestCerts, type TestCerts } from '../../../../floodgate-server/test/service/redis-tls-certs.js'

let certs: TestCerts
/** TLS, any client. */
let open: MemcachedProcess
/** TLS, a client certificate from the CA required (ssl_verify_mode=2). */
let mutual: MemcachedProcess
/** TLS with a certificate for another name only. */
let otherName: MemcachedProcess

const hourly = createPolicies([{ name: 'hour', algorithm: 'fixed-window', limit: 3, period: '1h' }])
const bucket = createPolicies([{ name: 'bucket', algorithm: 'token-bucket', limit: 2, period: '1h' }])
const NOW = Date.UTC(2026, 0, 1, 12, 30)
/** A patient memjs timeout: these tests need answers, not a speed. */
const PATIENT = { timeout: 10 }

function tlsArgs(server: { cert: string; key: string }, verify: number): string[] {
  return ['-Z', '-o', `ssl_chain_cert=${server.cert},ssl_key=${server.key},ssl_ca_cert=${certs.ca},ssl_verify_mode=${verify}`]
}

before(async () => {
  certs = makeTestCerts()
  ;[open, mutual, otherName] = await Promise.all([
    startMemcached(undefined, tlsArgs(certs.server, 0)),
    startMemcached(undefined, tlsArgs(certs.server, 2)),
    startMemcached(undefined, tlsArgs(certs.otherName, 0)),
  ])
})

after(async () => {
  await Promise.all([open, mutual, otherName].map((server) => server.stop()))
  certs.remove()
})

const pem = (path: string): string => readFileSync(path, 'utf8')
const trusting = (): MemcachedTlsOptions => ({ ca: pem(certs.ca) })
const withClientCert = (): MemcachedTlsOptions => ({ ca: pem(certs.ca), cert: pem(certs.client.cert), key: pem(certs.client.key) })

/** Remaining of each request, one after another, on `store` (fixed window then token bucket). */
async function remaining(store: MemcachedStore, key: string, times: number): Promise<number[]> {
  const seen: number[] = []
  for (let i = 0; i < times; i++) {
    const [response] = await store.evaluate([{ key, policies: hourly, cost: 1, now: NOW }])
    seen.push(response.results[0].remaining)
  }
  return seen
}

function unavailable(message: RegExp): (error: unknown) => boolean {
  return (error) => error instanceof FloodgateError && error.code === 'STORE_UNAVAILABLE' && message.test(error.message)
}

test('decisions over TLS count in memcached, counters and cas records alike', async () => {
  const store = new MemcachedStore({ servers: [open.address], tls: trusting(), memjs: PATIENT })
  try {
    assert.deepEqual(await remaining(store, 'tls:a', 4), [2, 1, 0, 0])
    const admitted: boolean[] = []
    for (let i = 0; i < 3; i++) {
      const [response] = await store.evaluate([{ key: 'tls:b', policies: bucket, cost: 1, now: NOW }])
      admitted.push(response.allowed)
    }
    assert.deepEqual(admitted, [true, true, false])
  } finally {
    store.close()
  }
  // A second store, on its own connection, sees what the first counted: the state is in memcached.
  const again = new MemcachedStore({ servers: open.address, tls: trusting(), memjs: PATIENT })
  try {
    assert.deepEqual(await remaining(again, 'tls:a', 1), [0])
  } finally {
    again.close()
  }
})

test("a client that does not trust the server's CA is refused, and the error says to give the CA", async () => {
  const store = new MemcachedStore({ servers: [open.address], tls: {}, memjs: PATIENT })
  try {
    await assert.rejects(remaining(store, 'tls:c', 1), unavailable(/over TLS: .*not signed by a trusted CA: give that CA \(tls\.ca\)/))
  } finally {
    store.close()
  }
})

test('a plain client to a TLS-only memcached gets no answer (the TLS option is what reaches it)', async () => {
  const store = new MemcachedStore({ servers: [open.address], memjs: { timeout: 0.5 } })
  try {
    await assert.rejects(remaining(store, 'tls:d', 1), unavailable(/memcached did not answer/))
  } finally {
    store.close()
  }
})

test('mTLS: without a client certificate refused with the reason; with one, decisions work', async () => {
  const without = new MemcachedStore({ servers: [mutual.address], tls: trusting(), memjs: PATIENT })
  try {
    await assert.rejects(
      remaining(without, 'tls:e', 1),
      unavailable(/requires a client certificate its CA signed \(tls\.cert and tls\.key\)/),
    )
  } finally {
    without.close()
  }
  const withCert = new MemcachedStore({ servers: [mutual.address], tls: withClientCert(), memjs: PATIENT })
  try {
    assert.deepEqual(await remaining(withCert, 'tls:e', 2), [2, 1])
  } finally {
    withCert.close()
  }
})

test('a certificate for another name is refused, and accepted when only the chain is checked', async () => {
  const strict = new MemcachedStore({ servers: [otherName.address], tls: trusting(), memjs: PATIENT })
  try {
    await assert.rejects(remaining(strict, 'tls:f', 1), unavailable(/certificate is for another name/))
  } finally {
    strict.close()
  }
  const chainOnly = new MemcachedStore({
    servers: [otherName.address],
    tls: { ...trusting(), checkServerIdentity: () => undefined },
    memjs: PATIENT,
  })
  try {
    assert.deepEqual(await remaining(chainOnly, 'tls:f', 1), [2])
  } finally {
    chainOnly.close()
  }
})

test('setServers: servers added while running are reached over TLS too', async () => {
  const store = new MemcachedStore({ servers: [open.address], tls: withClientCert(), memjs: PATIENT })
  try {
    await remaining(store, 'tls:g', 1)
    await store.setServers([mutual.address])
    // The mTLS server answers only a TLS client with a certificate: the new connection is the store's TLS one.
    assert.deepEqual(await remaining(store, 'tls:g', 2), [2, 1])
  } finally {
    store.close()
  }
})

test('tls must be an object, with cert and key together', () => {
  const invalid = (message: RegExp) => (error: unknown) =>
    error instanceof FloodgateError && error.code === 'INVALID_OPTION' && message.test(error.message)
  assert.throws(() => new MemcachedStore({ servers: [open.address], tls: true as never }), invalid(/tls: expected an object/))
  assert.throws(() => new MemcachedStore({ servers: [open.address], tls: { cert: 'x' } }), invalid(/cert and key together/))
  const plain = new MemcachedStore({ servers: [open.address] })
  assert.throws(() => new MemcachedStore({ client: plain.client, tls: {} }), invalid(/either client or servers/))
  plain.close()
})
