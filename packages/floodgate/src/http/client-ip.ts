// The client's IP behind proxies: which forwarding entries to believe, so a client cannot pick its own key.

import { BlockList } from 'node:net'
import { FloodgateError } from '../core/errors.js'
import { parseIp, parseIpv4, parseIpv6 } from './ip-key.js'

/**
 * Which proxies to believe.
 * - `false` (default): only the socket's peer address counts; forwarding headers are ignored.
 * - a number N: N proxies stand in front of the app; the client is the N-th address from the right
 *   of the forwarding chain, counting the socket peer as the rightmost.
 * - a list of addresses / CIDRs (and the names `loopback`, `linklocal`, `uniquelocal`): walk the
 *   chain from the right, skipping trusted proxies; the first untrusted address is the client.
 */
export type TrustProxy = false | number | readonly string[]

/** The header the proxies write: `X-Forwarded-For` (default) or RFC 7239 `Forwarded: for=…`. */
export type ForwardedHeader = 'x-forwarded-for' | 'forwarded'

/** A validated TrustProxy, ready to use per request. */
export type ProxyTrust = { kind: 'none' } | { kind: 'hops'; hops: number } | { kind: 'list'; trusted: BlockList }

const NAMED_RANGES: Record<string, readonly string[]> = {
  loopback: ['127.0.0.0/8', '::1/128'],
  linklocal: ['169.254.0.0/16', 'fe80::/10'],
  uniquelocal: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7'],
}

/** Validates `trustProxy`; errors name `field` and say what to write instead. */
export function compileProxyTrust(value: unknown, field = 'trustProxy'): ProxyTrust {
  if (value === undefined || value === false || value === 0) return { kind: 'none' }
  if (value === true) {
    throw new FloodgateError(
      'INVALID_OPTION',
      `${field}: true would believe every X-Forwarded-For entry, so any client could pick its own key; ` +
        "give the number of proxies in front of the app (e.g. 1) or their addresses/CIDRs (e.g. ['10.0.0.0/8'])",
    )
  }
  if (typeof value === 'number') {
    if (!Number.isInteger(value) || value < 0) {
      throw new FloodgateError('INVALID_OPTION', `${field}: a hop count must be a whole number ≥ 0, got ${value}`)
    }
    return { kind: 'hops', hops: value }
  }
  if (!Array.isArray(value)) {
    throw new FloodgateError(
      'INVALID_OPTION',
      `${field}: expected false, a number of proxies, or a list of proxy addresses/CIDRs, got ${JSON.stringify(value)}`,
    )
  }
  const trusted = new BlockList()
  for (const [i, entry] of value.entries()) {
    if (typeof entry === 'string' && NAMED_RANGES[entry] !== undefined) {
      for (const range of NAMED_RANGES[entry]) addRange(trusted, range, `${field}[${i}]`)
    } else {
      addRange(trusted, entry, `${field}[${i}]`)
    }
  }
  return { kind: 'list', trusted }
}

function addRange(list: BlockList, entry: unknown, field: string): void {
  const text = typeof entry === 'string' ? entry.trim() : ''
  const [address, prefixText, extra] = text.split('/')
  const bare = address.replace(/^\[|\]$/g, '')
  const family = parseIpv4(bare) !== undefined ? 4 : !bare.includes('%') && parseIpv6(bare) !== undefined ? 6 : 0
  const maxPrefix = family === 4 ? 32 : 128
  const prefix = prefixText === undefined ? maxPrefix : /^\d{1,3}$/.test(prefixText) ? Number(prefixText) : NaN
  if (family === 0 || extra !== undefined || !(prefix >= 0 && prefix <= maxPrefix)) {
    throw new FloodgateError(
      'INVALID_OPTION',
      `${field}: ${JSON.stringify(entry)} is not an IP address or CIDR; ` +
        `write e.g. '10.0.0.1', '10.0.0.0/8', 'fd00::/8', or one of ${Object.keys(NAMED_RANGES).join(', ')}`,
    )
  }
  list.addSubnet(bare, prefix, family === 4 ? 'ipv4' : 'ipv6')
}

function isTrusted(list: BlockList, address: string): boolean {
  const parsed = parseIp(address)
  if (parsed === undefined) return false
  if (parsed.family === 4) return list.check(parsed.address, 'ipv4') || list.check(`::ffff:${parsed.address}`, 'ipv6')
  return list.check(address.replace(/^\[|\]$/g, '').replace(/%.*$/, ''), 'ipv6')
}

/**
 * Strips a port and brackets from one forwarding entry (`1.2.3.4:80`, `[::1]:80`, `"[::1]"`);
 * undefined when what remains is not an IP (`unknown`, obfuscated `_hidden`, garbage).
 */
export function forwardedAddress(entry: string): string | undefined {
  let text = entry.trim()
  if (text.startsWith('"') && text.endsWith('"') && text.length >= 2) text = text.slice(1, -1)
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(text)
  if (bracketed) text = bracketed[1]
  else if (/^[\d.]+:\d+$/.test(text)) text = text.slice(0, text.lastIndexOf(':'))
  return parseIp(text) !== undefined ? text : undefined
}

/** The `for=` value of each element of an RFC 7239 `Forwarded` header, left to right (quotes respected). */
export function forwardedForValues(header: string): (string | undefined)[] {
  const elements: string[] = []
  let current = ''
  let quoted = false
  for (const char of header) {
    if (char === '"') quoted = !quoted
    if (char === ',' && !quoted) {
      elements.push(current)
      current = ''
    } else {
      current += char
    }
  }
  elements.push(current)
  return elements.map((element) => {
    for (const pair of element.split(';')) {
      const eq = pair.indexOf('=')
      if (eq !== -1 && pair.slice(0, eq).trim().toLowerCase() === 'for') return pair.slice(eq + 1).trim()
    }
    return undefined
  })
}

/** The forwarding chain, oldest hop first, socket peer last; entries that are no IP are undefined. */
function forwardingChain(remoteAddress: string | undefined, header: string | undefined, which: ForwardedHeader): (string | undefined)[] {
  const entries = header === undefined || header.trim() === '' ? [] : which === 'forwarded' ? forwardedForValues(header) : header.split(',')
  const chain = entries.map((entry) => (entry === undefined ? undefined : forwardedAddress(entry)))
  chain.push(remoteAddress === undefined ? undefined : forwardedAddress(remoteAddress))
  return chain
}

/**
 * The client address for one request. When the chosen entry is no IP (`unknown`), the nearest
 * valid address to its right (closer to us) is used: a request can never pick a fresh key by
 * sending garbage, it only lands on the proxy's key. Undefined only if no address is known at all.
 */
export function clientIp(
  remoteAddress: string | undefined,
  forwarded: string | undefined,
  trust: ProxyTrust,
  which: ForwardedHeader = 'x-forwarded-for',
): string | undefined {
  if (trust.kind === 'none') return remoteAddress === undefined ? undefined : forwardedAddress(remoteAddress)
  const chain = forwardingChain(remoteAddress, forwarded, which)
  let index: number
  if (trust.kind === 'hops') {
    index = Math.max(0, chain.length - 1 - trust.hops)
  } else {
    index = chain.length - 1
    while (index > 0 && chain[index] !== undefined && isTrusted(trust.trusted, chain[index]!)) index--
  }
  for (let i = index; i < chain.length; i++) {
    if (chain[i] !== undefined) return chain[i]
  }
  return undefined
}
