// Keys from rules files: the request's Envoy-style descriptors matched against a RuleSet (or a hot-reloading RuleWatcher).

import { FloodgateError } from '../core/errors.js'
import type { DescriptorEntry } from '../rules/match.js'
import type { RuleSet } from '../rules/rule-set.js'
import { NOT_LIMITED, type KeyGenerator, type KeyPart, type RequestInfo } from './keys.js'

/**
 * Where the rules come from, read again for every request: a `RuleSet`, anything holding the
 * current one in `current` (a `RuleWatcher`, so a reload applies from the next request on), or a
 * function returning it.
 */
export type RulesSource = RuleSet | { readonly current: RuleSet } | (() => RuleSet)

/**
 * The descriptors of one request, as Envoy's rate limit actions would build them. A descriptor
 * holding an undefined entry is left out, as Envoy leaves out a descriptor whose header is
 * missing; so is an undefined descriptor.
 */
export type RequestDescriptors = readonly (readonly (DescriptorEntry | undefined)[] | undefined)[]

/** Options of `keys.fromRules`. */
export interface RulesKeyOptions<Req> {
  /** The rules: a `RuleSet`, a `RuleWatcher`, or a function returning the current `RuleSet`. */
  rules: RulesSource
  /** The rules' `domain` to match in. */
  domain: string
  /**
   * The request's descriptors; build entries with `descriptor.remoteAddress(info)`,
   * `descriptor.header(info, 'x-user-id', 'user')`, `descriptor.generic('api')` or by hand.
   */
  descriptors: (req: Req, info: RequestInfo) => RequestDescriptors | Promise<RequestDescriptors>
}

/**
 * A key generator that limits each descriptor by the rule it matches: one part per matched rule
 * (its store key, its policies), decided together, all of them must admit. A descriptor that
 * matches nothing, or an unlimited rule, adds no limit; a request with no limited descriptor at
 * all passes unlimited (`NOT_LIMITED`), as Envoy answers OK.
 */
export function rulesKeyGenerator<Req = unknown>(options: RulesKeyOptions<Req>): KeyGenerator<Req> {
  const { domain, descriptors } = validRulesKeyOptions(options)
  const currentRules = rulesReader(options.rules, domain)
  return async (req, info) => {
    const complete = completeDescriptors(await descriptors(req, info))
    if (complete.length === 0) return NOT_LIMITED
    const parts: KeyPart[] = []
    for (const rule of currentRules().match(domain, complete)) {
      if (rule === undefined || rule.unlimited) continue
      // The rule's store key is already bounded (storeKeyOf hashes long ones), whatever a header holds.
      parts.push({ key: rule.storeKey, policies: rule.policies })
    }
    return parts.length === 0 ? NOT_LIMITED : parts
  }
}

function invalid(field: string, message: string): FloodgateError {
  return new FloodgateError('INVALID_OPTION', `keys.fromRules: ${field}: ${message}`)
}

function validRulesKeyOptions<Req>(options: RulesKeyOptions<Req>): RulesKeyOptions<Req> {
  if (options === null || typeof options !== 'object') {
    throw invalid(
      'options',
      "expected { rules, domain, descriptors }, e.g. { rules: new RuleWatcher('rules.yaml'), domain: 'edge', " +
        'descriptors: (req, info) => [[descriptor.remoteAddress(info)]] }',
    )
  }
  if (typeof options.domain !== 'string' || options.domain === '') {
    throw invalid('domain', `must be the non-empty domain of your rules file, got ${JSON.stringify(options.domain)}`)
  }
  if (typeof options.descriptors !== 'function') {
    throw invalid('descriptors', "must be a function (req, info) => [[{ key, value }, …], …] returning the request's descriptors")
  }
  return options
}

/** Reads the rules source as it is now; a fixed set or a watcher is checked once for the domain, so a typo fails at setup. */
function rulesReader(source: RulesSource, domain: string): () => RuleSet {
  if (typeof source === 'function') return source
  if (source !== null && typeof source === 'object') {
    if (isRuleSet(source)) {
      requireDomain(source, domain)
      return () => source
    }
    if ('current' in source && isRuleSet(source.current)) {
      requireDomain(source.current, domain)
      return () => source.current
    }
  }
  throw invalid(
    'rules',
    'must be a RuleSet (loadRules(path)), a RuleWatcher (new RuleWatcher(path)) or a function returning the current RuleSet',
  )
}

function isRuleSet(value: unknown): value is RuleSet {
  return (
    value !== null &&
    typeof value === 'object' &&
    typeof (value as RuleSet).match === 'function' &&
    (value as RuleSet).domains instanceof Set
  )
}

function requireDomain(rules: RuleSet, domain: string): void {
  if (rules.domains.has(domain)) return
  const known = [...rules.domains].map((name) => JSON.stringify(name)).join(', ')
  throw invalid(
    'domain',
    `${JSON.stringify(domain)} is not a domain of the loaded rules (they define ${known || 'none'}); ` +
      `use one of those or add a file with domain: ${domain}`,
  )
}

/** The descriptors to match: only those whose every entry is present; entries checked for shape. */
function completeDescriptors(descriptors: RequestDescriptors): DescriptorEntry[][] {
  if (!Array.isArray(descriptors as unknown)) {
    throw new FloodgateError(
      'INVALID_REQUEST',
      `keys.fromRules: descriptors returned ${JSON.stringify(descriptors)}; return a list of descriptors, each a list of { key, value }`,
    )
  }
  const complete: DescriptorEntry[][] = []
  for (const entries of descriptors) {
    if (entries === undefined || entries.length === 0 || entries.some((entry) => entry === undefined)) continue
    for (const entry of entries as readonly DescriptorEntry[]) {
      if (typeof entry?.key !== 'string' || typeof entry.value !== 'string') {
        throw new FloodgateError(
          'INVALID_REQUEST',
          `keys.fromRules: descriptor entry ${JSON.stringify(entry)} is not { key: string, value: string }`,
        )
      }
    }
    complete.push(entries as DescriptorEntry[])
  }
  return complete
}

/** `remote_address` = the client IP the middleware resolved (after `trustProxy`; IPv6 as its /56 unless `ipv6Subnet: false`). */
export function remoteAddressEntry(info: RequestInfo): DescriptorEntry | undefined {
  return info.ip === undefined ? undefined : { key: 'remote_address', value: info.ip }
}

/** Envoy's `request_headers` action: `descriptorKey` = the header's value; undefined when the header is absent or empty. */
export function headerEntry(info: RequestInfo, headerName: string, descriptorKey: string): DescriptorEntry | undefined {
  const value = info.header(headerName)
  return value === undefined || value === '' ? undefined : { key: descriptorKey, value }
}

/** Envoy's `generic_key` action: a fixed entry, e.g. to give a route its own limit. */
export function genericEntry(value: string, descriptorKey = 'generic_key'): DescriptorEntry {
  return { key: descriptorKey, value }
}

/** Descriptor entry builders named after Envoy's rate limit actions, for `keys.fromRules`'s `descriptors`. */
export const descriptor = {
  remoteAddress: remoteAddressEntry,
  header: headerEntry,
  generic: genericEntry,
}
