// IP addresses as rate-limit keys: strict parsing, IPv4-mapped IPv6 as IPv4, IPv6 grouped by prefix.

/** A parsed address: IPv4 as its dotted text, IPv6 as eight 16-bit groups. */
export type ParsedIp = { family: 4; address: string } | { family: 6; groups: number[] }

/** The default IPv6 prefix: a /56 is what one subscriber typically gets, so rotating inside it keeps one key. */
export const DEFAULT_IPV6_SUBNET = 56

const IPV4_OCTET = /^(?:0|[1-9]\d{0,2})$/
const IPV6_GROUP = /^[0-9a-f]{1,4}$/

/** Parses dotted IPv4 strictly (no leading zeros, which some parsers read as octal); undefined if invalid. */
export function parseIpv4(text: string): number[] | undefined {
  const parts = text.split('.')
  if (parts.length !== 4) return undefined
  const octets: number[] = []
  for (const part of parts) {
    if (!IPV4_OCTET.test(part)) return undefined
    const value = Number(part)
    if (value > 255) return undefined
    octets.push(value)
  }
  return octets
}

/**
 * Parses IPv6 text into eight groups: `::` compression, an embedded IPv4 tail (`::ffff:1.2.3.4`),
 * brackets (`[::1]`) and a zone id (`fe80::1%eth0`, dropped: it names a local interface, not a host).
 */
export function parseIpv6(text: string): number[] | undefined {
  let body = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text
  const zone = body.indexOf('%')
  if (zone !== -1) body = body.slice(0, zone)
  body = body.toLowerCase()
  const halves = body.split('::')
  if (halves.length > 2) return undefined
  const head = parseGroups(halves[0])
  const tail = halves.length === 2 ? parseGroups(halves[1]) : []
  if (head === undefined || tail === undefined) return undefined
  if (halves.length === 1) return head.length === 8 ? head : undefined
  const missing = 8 - head.length - tail.length
  if (missing < 1) return undefined
  return [...head, ...new Array<number>(missing).fill(0), ...tail]
}

function parseGroups(text: string): number[] | undefined {
  if (text === '') return []
  const parts = text.split(':')
  const groups: number[] = []
  for (const [i, part] of parts.entries()) {
    if (i === parts.length - 1 && part.includes('.')) {
      const octets = parseIpv4(part)
      if (octets === undefined) return undefined
      groups.push((octets[0] << 8) | octets[1], (octets[2] << 8) | octets[3])
    } else if (IPV6_GROUP.test(part)) {
      groups.push(parseInt(part, 16))
    } else {
      return undefined
    }
  }
  return groups
}

/** Parses either family; an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) comes back as IPv4. */
export function parseIp(text: string): ParsedIp | undefined {
  const trimmed = text.trim()
  if (parseIpv4(trimmed) !== undefined) return { family: 4, address: trimmed }
  const groups = parseIpv6(trimmed)
  if (groups === undefined) return undefined
  if (isIpv4Mapped(groups)) {
    return { family: 4, address: `${groups[6] >> 8}.${groups[6] & 255}.${groups[7] >> 8}.${groups[7] & 255}` }
  }
  return { family: 6, groups }
}

function isIpv4Mapped(groups: readonly number[]): boolean {
  return groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff
}

/** RFC 5952 text: lowercase, no leading zeros, the longest run (≥ 2) of zero groups as `::`, first on ties. */
export function formatIpv6(groups: readonly number[]): string {
  let bestStart = -1
  let bestLength = 1
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++
      continue
    }
    let j = i
    while (j < 8 && groups[j] === 0) j++
    if (j - i > bestLength) {
      bestStart = i
      bestLength = j - i
    }
    i = j
  }
  const hex = groups.map((g) => g.toString(16))
  if (bestStart === -1) return hex.join(':')
  const head = hex.slice(0, bestStart).join(':')
  const tail = hex.slice(bestStart + bestLength).join(':')
  return `${head}::${tail}`
}

/** Zeroes every bit after the first `prefix` bits: the network address of the /prefix holding the address. */
export function maskIpv6(groups: readonly number[], prefix: number): number[] {
  return groups.map((group, i) => {
    const bits = Math.min(16, Math.max(0, prefix - i * 16))
    return bits === 0 ? 0 : group & ((0xffff << (16 - bits)) & 0xffff)
  })
}

/**
 * The key text for a client address: IPv4 as is (mapped IPv6 included), IPv6 as the normalized
 * network address plus `/prefix` (`2001:db8:1200::/56`) so that one allocation shares one limit.
 * `ipv6Subnet: false` keys each full IPv6 address on its own. Undefined when the text is no IP.
 */
export function ipKey(address: string, ipv6Subnet: number | false = DEFAULT_IPV6_SUBNET): string | undefined {
  const parsed = parseIp(address)
  if (parsed === undefined) return undefined
  if (parsed.family === 4) return parsed.address
  if (ipv6Subnet === false) return formatIpv6(parsed.groups)
  return `${formatIpv6(maskIpv6(parsed.groups, ipv6Subnet))}/${ipv6Subnet}`
}
