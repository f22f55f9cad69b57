// IP parsing, RFC 5952 formatting and IPv6 prefix grouping, checked against node:net as an independent oracle.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { BlockList, SocketAddress } from 'node:net'
import fc from 'fast-check'
import { formatIpv6, ipKey, maskIpv6, parseIp, parseIpv4, parseIpv6 } from '../../src/http/ip-key.js'

const groupsArbitrary = fc.array(fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 0xffff })), { minLength: 8, maxLength: 8 })

/** Addresses node prints in dotted form (IPv4-mapped, IPv4-compatible) are formatted by other rules; skip them. */
function printedAsIpv4(groups: number[]): boolean {
  const sixZeros = groups.slice(0, 6).every((g) => g === 0) && groups[6] !== 0
  const mapped = groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff
  return sixZeros || mapped
}

describe('parseIpv4', () => {
  it('accepts dotted quads and rejects leading zeros, out-of-range octets and wrong shapes', () => {
    assert.deepEqual(parseIpv4('192.0.2.1'), [192, 0, 2, 1])
    assert.deepEqual(parseIpv4('0.0.0.0'), [0, 0, 0, 0])
    for (const bad of ['010.0.0.1', '256.1.1.1', '1.2.3', '1.2.3.4.5', '1.2.3.x', '', '1..2.3']) {
      assert.equal(parseIpv4(bad), undefined, bad)
    }
  })
})

describe('parseIpv6', () => {
  it('expands compression, embedded IPv4, brackets and zone ids', () => {
    assert.deepEqual(parseIpv6('::1'), [0, 0, 0, 0, 0, 0, 0, 1])
    assert.deepEqual(parseIpv6('2001:DB8::'), [0x2001, 0xdb8, 0, 0, 0, 0, 0, 0])
    assert.deepEqual(parseIpv6('[fe80::1%eth0]'), [0xfe80, 0, 0, 0, 0, 0, 0, 1])
    assert.deepEqual(parseIpv6('64:ff9b::192.0.2.33'), [0x64, 0xff9b, 0, 0, 0, 0, 0xc000, 0x0221])
  })

  it('rejects malformed text', () => {
    for (const bad of ['1::2::3', '1:2:3:4:5:6:7', '1:2:3:4:5:6:7:8:9', '12345::', 'g::1', '::1.2.3', '1:2:3:4:5:6:7::8:9', ':::']) {
      assert.equal(parseIpv6(bad), undefined, bad)
    }
  })

  it('round-trips through formatIpv6 for any address', () => {
    fc.assert(
      fc.property(groupsArbitrary, (groups) => {
        assert.deepEqual(parseIpv6(formatIpv6(groups)), groups)
      }),
      { numRuns: 500 },
    )
  })
})

describe('formatIpv6', () => {
  it('prints the RFC 5952 form, the same as node:net', () => {
    fc.assert(
      fc.property(groupsArbitrary, (groups) => {
        fc.pre(!printedAsIpv4(groups))
        const full = groups.map((g) => g.toString(16)).join(':')
        assert.equal(formatIpv6(groups), new SocketAddress({ address: full, family: 'ipv6' }).address)
      }),
      { numRuns: 500 },
    )
  })

  it('compresses the longest zero run, the first on ties, never a single zero group', () => {
    assert.equal(formatIpv6([0x2001, 0xdb8, 0, 0, 1, 0, 0, 1]), '2001:db8::1:0:0:1')
    assert.equal(formatIpv6([0x2001, 0xdb8, 0, 1, 1, 1, 1, 1]), '2001:db8:0:1:1:1:1:1')
    assert.equal(formatIpv6([0, 0, 0, 0, 0, 0, 0, 0]), '::')
  })
})

describe('parseIp', () => {
  it('treats IPv4-mapped IPv6 as IPv4', () => {
    assert.deepEqual(parseIp('::ffff:203.0.113.9'), { family: 4, address: '203.0.113.9' })
    assert.deepEqual(parseIp('::FFFF:cb00:7109'), { family: 4, address: '203.0.113.9' })
    assert.equal(parseIp('not-an-ip'), undefined)
  })
})

describe('maskIpv6 / ipKey', () => {
  it('the masked network contains the address and nothing outside the prefix (checked with node BlockList)', () => {
    fc.assert(
      fc.property(groupsArbitrary, groupsArbitrary, fc.integer({ min: 1, max: 128 }), fc.boolean(), (a, other, prefix, inside) => {
        // Half the time b shares a's first `prefix` bits, so both outcomes of the comparison occur.
        const b = inside ? a.map((g, i) => (g & highMask(prefix, i)) | (other[i] & ~highMask(prefix, i) & 0xffff)) : other
        const network = formatIpv6(maskIpv6(a, prefix))
        const list = new BlockList()
        list.addSubnet(network, prefix, 'ipv6')
        assert.ok(list.check(formatIpv6(a), 'ipv6'))
        const sameKey = ipKey(formatIpv6(a), prefix) === ipKey(formatIpv6(b), prefix)
        if (!printedAsIpv4(a) && !printedAsIpv4(b) && !isMapped(a) && !isMapped(b)) {
          assert.equal(sameKey, list.check(formatIpv6(b), 'ipv6'))
        }
      }),
      { numRuns: 300 },
    )
  })

  it('groups IPv6 by /56 by default and keys IPv4 as is', () => {
    assert.equal(ipKey('2001:db8:abcd:12ff:1:2:3:4'), '2001:db8:abcd:1200::/56')
    assert.equal(ipKey('2001:db8:abcd:1234::9'), ipKey('2001:db8:abcd:12aa:ffff::1'))
    assert.notEqual(ipKey('2001:db8:abcd:1234::9'), ipKey('2001:db8:abcd:1334::9'))
    assert.equal(ipKey('2001:DB8:0:0::1', false), '2001:db8::1')
    assert.equal(ipKey('2001:db8::1', 64), '2001:db8::/64')
    assert.equal(ipKey('198.51.100.7'), '198.51.100.7')
    assert.equal(ipKey('::ffff:198.51.100.7'), '198.51.100.7')
    assert.equal(ipKey('fe80::1%eth0', false), 'fe80::1')
    assert.equal(ipKey('junk'), undefined)
  })
})

function isMapped(groups: number[]): boolean {
  return groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff
}

function highMask(prefix: number, group: number): number {
  const bits = Math.min(16, Math.max(0, prefix - group * 16))
  return (0xffff << (16 - bits)) & 0xffff
}
