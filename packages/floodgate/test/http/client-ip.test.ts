// Client IP behind proxies: hop counts, trusted CIDR lists, RFC 7239 Forwarded, and spoofing attempts.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import { clientIp, compileProxyTrust, forwardedAddress, forwardedForValues } from '../../src/http/client-ip.js'
import { FloodgateError } from '../../src/core/errors.js'

const PROXY = '10.0.0.2'
const off = compileProxyTrust(false)
const oneHop = compileProxyTrust(1)
const twoHops = compileProxyTrust(2)
const cidrs = compileProxyTrust(['10.0.0.0/8', 'fd00::/8'])

describe('clientIp with trustProxy off', () => {
  it('uses the socket address and ignores forwarding headers', () => {
    assert.equal(clientIp('203.0.113.5', '198.51.100.1', off), '203.0.113.5')
    assert.equal(clientIp('::ffff:203.0.113.5', undefined, off), '::ffff:203.0.113.5')
    assert.equal(clientIp(undefined, '198.51.100.1', off), undefined)
  })
})

describe('clientIp with a hop count', () => {
  it('takes the N-th address from the right, the socket peer counting as the rightmost', () => {
    assert.equal(clientIp(PROXY, '198.51.100.1', oneHop), '198.51.100.1')
    assert.equal(clientIp(PROXY, '198.51.100.1, 10.0.0.9', twoHops), '198.51.100.1')
    assert.equal(clientIp(PROXY, '1.1.1.1, 198.51.100.1, 10.0.0.9', twoHops), '198.51.100.1')
  })

  it('a client prepending its own X-Forwarded-For does not change its key', () => {
    // The proxy appends the real client address; whatever the client sent stays to its left.
    assert.equal(clientIp(PROXY, '6.6.6.6, 198.51.100.1', oneHop), '198.51.100.1')
    assert.equal(clientIp(PROXY, '6.6.6.6, 7.7.7.7, 198.51.100.1', oneHop), '198.51.100.1')
  })

  it('with fewer entries than hops, takes the leftmost; garbage falls back to the nearest valid hop', () => {
    assert.equal(clientIp(PROXY, undefined, twoHops), PROXY)
    assert.equal(clientIp(PROXY, 'garbage', oneHop), PROXY)
  })
})

describe('clientIp with trusted CIDRs', () => {
  it('walks from the right past trusted proxies to the first untrusted address', () => {
    assert.equal(clientIp(PROXY, '198.51.100.1, 10.1.2.3', cidrs), '198.51.100.1')
    assert.equal(clientIp(PROXY, '6.6.6.6, 198.51.100.1, 10.1.2.3', cidrs), '198.51.100.1')
    assert.equal(clientIp('fd00::1', '2001:db8::7', cidrs), '2001:db8::7')
    assert.equal(clientIp('::ffff:10.0.0.2', '198.51.100.1', cidrs), '198.51.100.1')
  })

  it('ignores forwarding headers from an untrusted peer (a client talking to the app directly)', () => {
    assert.equal(clientIp('203.0.113.5', '10.0.0.1, 1.2.3.4', cidrs), '203.0.113.5')
  })

  it('a client cannot hide behind a fake trusted address', () => {
    // The client claims to be 10.9.9.9 (trusted range); the proxy appended the real address.
    assert.equal(clientIp(PROXY, '10.9.9.9, 198.51.100.1', cidrs), '198.51.100.1')
  })

  it('when every hop is trusted, the leftmost is the client', () => {
    assert.equal(clientIp(PROXY, '10.5.5.5, 10.1.1.1', cidrs), '10.5.5.5')
  })

  it('any prefix a client sends is ignored (property)', () => {
    const ipv4 = fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255)).map((o) => o.join('.'))
    fc.assert(
      fc.property(fc.array(fc.oneof(ipv4, fc.string({ maxLength: 12 })), { maxLength: 5 }), ipv4, (spoofed, real) => {
        fc.pre(!real.startsWith('10.'))
        const header = [...spoofed.map((s) => s.replace(/,/g, '')), real].join(', ')
        assert.equal(clientIp(PROXY, header, cidrs), real)
        assert.equal(clientIp(PROXY, header, oneHop), real)
      }),
      { numRuns: 300 },
    )
  })

  it('accepts the named ranges loopback, linklocal and uniquelocal', () => {
    const named = compileProxyTrust(['loopback', 'uniquelocal'])
    assert.equal(clientIp('127.0.0.1', '192.168.1.4, 198.51.100.1, 192.168.1.1', named), '198.51.100.1')
    assert.equal(clientIp('::1', '198.51.100.1', named), '198.51.100.1')
  })
})

describe('RFC 7239 Forwarded', () => {
  it('reads for= values, quoted IPv6 with ports, and ignores other parameters', () => {
    assert.deepEqual(forwardedForValues('for=192.0.2.60;proto=http;by=203.0.113.43, for="[2001:db8:cafe::17]:4711"'), [
      '192.0.2.60',
      '"[2001:db8:cafe::17]:4711"',
    ])
    assert.deepEqual(forwardedForValues('proto=https, For=unknown'), [undefined, 'unknown'])
    assert.equal(forwardedAddress('"[2001:db8:cafe::17]:4711"'), '2001:db8:cafe::17')
    assert.equal(forwardedAddress('192.0.2.60:8080'), '192.0.2.60')
    assert.equal(forwardedAddress('_hidden'), undefined)
  })

  it('resolves the client through trusted proxies', () => {
    const header = 'for=6.6.6.6, for="[2001:db8:cafe::17]:4711";proto=https, for=10.1.1.1'
    assert.equal(clientIp(PROXY, header, cidrs, 'forwarded'), '2001:db8:cafe::17')
    assert.equal(clientIp(PROXY, 'for=unknown', cidrs, 'forwarded'), PROXY)
  })
})

describe('compileProxyTrust', () => {
  it('rejects true, negative counts and bad CIDRs with a message saying what to write', () => {
    const cases: [unknown, RegExp][] = [
      [true, /trustProxy: true would believe every X-Forwarded-For entry/],
      [-1, /trustProxy: a hop count must be a whole number ≥ 0/],
      [1.5, /trustProxy: a hop count/],
      ['10.0.0.0/8', /trustProxy: expected false, a number of proxies, or a list/],
      [['10.0.0.0/33'], /trustProxy\[0\]: "10.0.0.0\/33" is not an IP address or CIDR/],
      [['10.0.0.0/8', 'proxy.local'], /trustProxy\[1\]: "proxy.local" is not an IP address or CIDR/],
      [['fe80::1%eth0'], /trustProxy\[0\]/],
      [[42], /trustProxy\[0\]: 42 is not an IP address/],
    ]
    for (const [value, message] of cases) {
      assert.throws(
        () => compileProxyTrust(value),
        (error: unknown) => {
          assert.ok(error instanceof FloodgateError)
          assert.equal(error.code, 'INVALID_OPTION')
          assert.match(error.message, message)
          return true
        },
      )
    }
  })
})
