// Validates one rules file (envoyproxy/ratelimit YAML + Floodgate `limits:`) into a typed domain tree.

import type { Node } from 'yaml'
import { FloodgateError } from '../core/errors.js'
import { createPolicy, syncMismatch, syncMismatchMessage, type Policy, type PolicyOptions } from '../core/policy.js'
import { ENVOY_UNITS, UNIT_MS, parseUnit, type EnvoyUnit } from './units.js'
import type { MapEntry, YamlSource } from './yaml-source.js'

/** What a matched descriptor applies; shared by every request that matches it. */
export interface RuleTemplate {
  /** Bounded-cardinality id: domain + config path (`edge.plan_premium.user`). */
  readonly id: string
  readonly name: string | undefined
  readonly policies: readonly Policy[]
  readonly unlimited: boolean
  /** An allow-listed value (no limit of its own): unlimited, but Envoy answers it as "no limit" (remaining 0), as upstream. */
  readonly allowListed?: true
  readonly shadow: boolean
  readonly detailedMetric: boolean
  /** Names of limits this rule removes from the other descriptors of the same request. */
  readonly replaces: readonly string[]
  /** The Envoy-style limit, for `rate_limit` rules only (Envoy's `current_limit`). */
  readonly envoy: { unit: EnvoyUnit; requestsPerUnit: number } | undefined
  /**
   * `quota_mode: true`: an over-limit answer for this descriptor denies the request only when every
   * quota descriptor of the request is over (upstream's quota mode).
   */
  readonly quota: boolean
  /** `metadata:` written on the descriptor (JSON-like), for Envoy's dynamic metadata; `undefined` when none. */
  readonly metadata: Readonly<Record<string, unknown>> | undefined
}

/** One validated descriptor entry of the config tree. */
export interface DescriptorConfig {
  readonly key: string
  /** `undefined` when the entry gives only a key (matches any value of that key). */
  readonly value: string | undefined
  /** Where it was written, for the admin description. */
  readonly line: number | undefined
  readonly rule: RuleTemplate | undefined
  readonly descriptors: readonly DescriptorConfig[]
  /** `value_to_metric: true`: metric keys name the request's value at this level, not the config's. */
  readonly valueToMetric: boolean
  /** `share_threshold: true` (wildcard values only): every value the pattern matches shares one counter. */
  readonly shareThreshold: boolean
}

/** One validated file: a domain and its tree. */
export interface DomainConfig {
  readonly domain: string
  readonly file: string
  readonly line: number | undefined
  readonly descriptors: readonly DescriptorConfig[]
}

const ROOT_KEYS = ['domain', 'descriptors']
const DESCRIPTOR_KEYS = [
  'key',
  'value',
  'rate_limit',
  'limits',
  'descriptors',
  'shadow_mode',
  'detailed_metric',
  'quota_mode',
  'value_to_metric',
  'share_threshold',
  'metadata',
]
const RATE_LIMIT_KEYS = ['unit', 'requests_per_unit', 'unlimited', 'name', 'replaces']
const REPLACES_KEYS = ['name']
const UNIT_LIST = `${ENVOY_UNITS.join(', ')} (any case)`

/**
 * Reads one file's tree. Reports every issue it finds into the source's issue list and returns
 * `undefined` only when not even a domain could be read; callers reject the file set whenever
 * any issue was reported.
 * @internal (not in the .d.ts: the only declaration there that would name `yaml`'s types, which an
 * app without rules files, and so without the optional `yaml` peer, could not resolve)
 */
export function readDomainFile(src: YamlSource): DomainConfig | undefined {
  if (src.malformed) return undefined
  const entries = src.entries(src.root)
  if (entries === undefined) {
    const message =
      src.root === undefined
        ? 'the file is empty; write `domain: <name>` and a list of `descriptors`'
        : 'expected a mapping with `domain` and `descriptors` at the top level'
    src.report(src.root, '', message)
    return undefined
  }
  const fields = checkKeys(src, entries, '', ROOT_KEYS)
  const domainNode = fields.get('domain')
  const domain = src.text(domainNode?.value)
  if (domainNode === undefined) {
    src.report(src.root, 'domain', 'missing domain; add `domain: <name>` (the domain Envoy sends in its requests)')
  } else if (domain === undefined || domain.trim() === '') {
    src.report(domainNode.value ?? domainNode.keyNode, 'domain', 'domain must be a non-empty string')
  }
  const descriptors = readDescriptorList(src, fields.get('descriptors'), 'descriptors', domain ?? '')
  if (domain === undefined || domain.trim() === '') return undefined
  return { domain, file: src.file, line: src.lineOf(domainNode?.keyNode), descriptors }
}

function readDescriptorList(src: YamlSource, entry: MapEntry | undefined, path: string, parentId: string): DescriptorConfig[] {
  if (entry?.value === undefined) return []
  const items = src.items(entry.value)
  if (items === undefined) {
    src.report(entry.value, path, 'expected a list of descriptors (`- key: ...` items)')
    return []
  }
  const firstLineOf = new Map<string, number | undefined>()
  const out: DescriptorConfig[] = []
  items.forEach((item, i) => {
    const itemPath = `${path}[${i}]`
    const descriptor = readDescriptor(src, item, itemPath, parentId)
    if (descriptor === undefined) return
    const identity = descriptor.value === undefined ? `k:${descriptor.key}` : `kv:${descriptor.key}\u0000${descriptor.value}`
    if (firstLineOf.has(identity)) {
      const what =
        descriptor.value === undefined
          ? `key "${descriptor.key}" without a value`
          : `key "${descriptor.key}" with value "${descriptor.value}"`
      const first = firstLineOf.get(identity)
      src.report(
        item,
        itemPath,
        `duplicate descriptor: ${what} already appears at this level${first ? ` (line ${first})` : ''}; merge the two entries into one`,
      )
      return
    }
    firstLineOf.set(identity, descriptor.line)
    out.push(descriptor)
  })
  return out
}

function readDescriptor(src: YamlSource, node: Node | undefined, path: string, parentId: string): DescriptorConfig | undefined {
  const entries = src.entries(node)
  if (entries === undefined) {
    src.report(
      node,
      path,
      'expected a descriptor mapping such as `{ key: remote_address, rate_limit: { unit: second, requests_per_unit: 10 } }`',
    )
    return undefined
  }
  const fields = checkKeys(src, entries, path, DESCRIPTOR_KEYS)
  const keyEntry = fields.get('key')
  const key = src.text(keyEntry?.value)
  if (keyEntry === undefined) {
    src.report(node, `${path}.key`, 'descriptor has no key; add `key: <descriptor key>` (e.g. remote_address, generic_key)')
  } else if (key === undefined || key === '') {
    src.report(keyEntry.value ?? keyEntry.keyNode, `${path}.key`, 'descriptor key must be a non-empty string')
  }
  const valueEntry = fields.get('value')
  let value = src.text(valueEntry?.value)
  if (valueEntry?.value !== undefined && value === undefined) {
    src.report(valueEntry.value, `${path}.value`, 'value must be a string (quote it if needed); omit it to match any value')
  }
  if (value === '') value = undefined // as upstream: an empty value means "key only"

  const id = `${parentId}.${value === undefined ? key : `${key}_${value}`}`
  const shadow = readBoolean(src, fields.get('shadow_mode'), `${path}.shadow_mode`)
  const detailedMetric = readBoolean(src, fields.get('detailed_metric'), `${path}.detailed_metric`)
  const quota = readBoolean(src, fields.get('quota_mode'), `${path}.quota_mode`)
  const valueToMetric = readBoolean(src, fields.get('value_to_metric'), `${path}.value_to_metric`)
  const shareEntry = fields.get('share_threshold')
  const shareThreshold = readBoolean(src, shareEntry, `${path}.share_threshold`)
  if (shareThreshold && !value?.includes('*')) {
    // As upstream: sharing one counter only means something for the values a wildcard matches.
    src.report(
      shareEntry?.keyNode,
      `${path}.share_threshold`,
      'share_threshold applies only to a wildcard value (one containing `*`); remove it or write a pattern such as `value: files/*`',
    )
  }
  const metadata = readMetadata(src, fields.get('metadata'), `${path}.metadata`)
  const children = readDescriptorList(src, fields.get('descriptors'), `${path}.descriptors`, id)
  const rule = readRule(src, fields, path, {
    id,
    shadow,
    detailedMetric,
    quota,
    metadata,
    isValueEntry: value !== undefined,
    hasChildren: children.length > 0,
  })
  if (key === undefined || key === '') return undefined
  return { key, value, line: src.lineOf(node), rule, descriptors: children, valueToMetric, shareThreshold }
}

/** `metadata:` is free-form (upstream passes it on as a protobuf Struct), but must be a mapping. */
function readMetadata(src: YamlSource, entry: MapEntry | undefined, path: string): Readonly<Record<string, unknown>> | undefined {
  if (entry?.value === undefined) return undefined
  if (src.entries(entry.value) === undefined) {
    src.report(entry.value, path, 'metadata must be a mapping, e.g. `metadata: { name: service_1 }`')
    return undefined
  }
  return Object.freeze(src.plain(entry.value) as Record<string, unknown>)
}

interface RuleContext {
  id: string
  shadow: boolean
  detailedMetric: boolean
  quota: boolean
  metadata: Readonly<Record<string, unknown>> | undefined
  isValueEntry: boolean
  hasChildren: boolean
}

function readRule(src: YamlSource, fields: Map<string, MapEntry>, path: string, ctx: RuleContext): RuleTemplate | undefined {
  const rateLimit = fields.get('rate_limit')
  const limits = fields.get('limits')
  const base = { id: ctx.id, shadow: ctx.shadow, detailedMetric: ctx.detailedMetric, quota: ctx.quota, metadata: ctx.metadata }
  if (rateLimit !== undefined && limits !== undefined) {
    src.report(
      limits.keyNode,
      `${path}.limits`,
      'a descriptor takes either `rate_limit` (Envoy style) or `limits` (Floodgate policies), not both; remove one',
    )
    return undefined
  }
  if (rateLimit !== undefined) return readRateLimit(src, rateLimit, `${path}.rate_limit`, base)
  if (limits !== undefined) {
    const policies = readLimits(src, limits, `${path}.limits`, ctx.shadow)
    return policies && { ...base, name: undefined, policies, unlimited: false, replaces: [], envoy: undefined }
  }
  if (ctx.isValueEntry && !ctx.hasChildren) {
    // An allow-listed value: matched, and never counted.
    return { ...base, name: undefined, policies: [], unlimited: true, allowListed: true, replaces: [], envoy: undefined }
  }
  return undefined
}

type RuleBase = Pick<RuleTemplate, 'id' | 'shadow' | 'detailedMetric' | 'quota' | 'metadata'>

function readRateLimit(src: YamlSource, entry: MapEntry, path: string, base: RuleBase): RuleTemplate | undefined {
  const entries = src.entries(entry.value)
  if (entries === undefined) {
    src.report(
      entry.value ?? entry.keyNode,
      path,
      'expected a mapping such as `{ unit: minute, requests_per_unit: 100 }` or `{ unlimited: true }`',
    )
    return undefined
  }
  const fields = checkKeys(src, entries, path, RATE_LIMIT_KEYS)
  const unlimited = readBoolean(src, fields.get('unlimited'), `${path}.unlimited`)
  const unitEntry = fields.get('unit')
  const countEntry = fields.get('requests_per_unit')
  const nameEntry = fields.get('name')
  const name = src.text(nameEntry?.value)
  if (nameEntry !== undefined && (name === undefined || name === '')) {
    src.report(
      nameEntry.value ?? nameEntry.keyNode,
      `${path}.name`,
      'name must be a non-empty string (other rules refer to it in `replaces`)',
    )
  }
  const replaces = readReplaces(src, fields.get('replaces'), `${path}.replaces`, name)

  if (unlimited) {
    let ok = true
    if (unitEntry !== undefined) {
      src.report(unitEntry.keyNode, `${path}.unit`, '`unlimited: true` takes no unit; remove `unit` or set `unlimited: false`')
      ok = false
    }
    // A requests_per_unit beside `unlimited: true` is ignored, as upstream does. An unlimited rule's
    // `replaces` still removes the named rules (upstream collects them before skipping the unlimited one).
    return ok && replaces !== undefined
      ? { ...base, name: name || undefined, policies: [], unlimited: true, replaces, envoy: undefined }
      : undefined
  }

  const unit = readUnit(src, unitEntry, path, entry.value)
  const requestsPerUnit = readRequestsPerUnit(src, countEntry, path, entry.value)
  if (unit === undefined || requestsPerUnit === undefined || replaces === undefined) return undefined
  // Named after the unit, not the rate or the rule name: upstream keys a counter by descriptor and
  // window, so editing requests_per_unit (or an Envoy override of it) keeps the count of the window.
  const policy = createPolicy(
    { name: envoyPolicyName(unit), algorithm: 'fixed-window', limit: requestsPerUnit, period: UNIT_MS[unit], shadow: base.shadow },
    path,
  )
  return {
    ...base,
    name: name || undefined,
    policies: Object.freeze([policy]),
    unlimited: false,
    replaces,
    envoy: Object.freeze({ unit, requestsPerUnit }),
  }
}

/** The policy name of every Envoy-style limit of one unit (`per-minute`): it names the counter in the store. */
export function envoyPolicyName(unit: EnvoyUnit): string {
  return `per-${unit.toLowerCase()}`
}

function readUnit(src: YamlSource, entry: MapEntry | undefined, path: string, parent: Node | undefined): EnvoyUnit | undefined {
  if (entry === undefined) {
    src.report(parent, `${path}.unit`, `missing unit; add \`unit: <${UNIT_LIST}>\`, or write \`unlimited: true\``)
    return undefined
  }
  const text = src.text(entry.value)
  const unit = text === undefined ? undefined : parseUnit(text)
  if (unit === undefined) {
    const hint = text === undefined ? '' : suggestion(text.toUpperCase(), ENVOY_UNITS)
    src.report(entry.value ?? entry.keyNode, `${path}.unit`, `unknown unit ${JSON.stringify(text ?? null)}${hint}; use one of ${UNIT_LIST}`)
  }
  return unit
}

function readRequestsPerUnit(src: YamlSource, entry: MapEntry | undefined, path: string, parent: Node | undefined): number | undefined {
  if (entry === undefined) {
    src.report(
      parent,
      `${path}.requests_per_unit`,
      'missing requests_per_unit; add `requests_per_unit: <whole number ≥ 0>`, or write `unlimited: true`',
    )
    return undefined
  }
  const value = src.scalar(entry.value)
  // 0 denies every request, as in envoyproxy/ratelimit (a fixed window of limit 0).
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > 0xffffffff) {
    src.report(
      entry.value ?? entry.keyNode,
      `${path}.requests_per_unit`,
      `requests_per_unit must be a whole number from 0 (deny all) to 4294967295, got ${describeNode(src, entry.value)}`,
    )
    return undefined
  }
  return value
}

function readReplaces(src: YamlSource, entry: MapEntry | undefined, path: string, ownName: string | undefined): string[] | undefined {
  if (entry?.value === undefined) return []
  const items = src.items(entry.value)
  if (items === undefined) {
    src.report(entry.value, path, 'expected a list like `[{ name: other_limit }]`')
    return undefined
  }
  const names: string[] = []
  let ok = true
  items.forEach((item, i) => {
    const itemPath = `${path}[${i}]`
    const entries = src.entries(item)
    if (entries === undefined) {
      src.report(item ?? entry.value, itemPath, 'expected `{ name: <rate_limit name to replace> }`')
      ok = false
      return
    }
    const nameEntry = checkKeys(src, entries, itemPath, REPLACES_KEYS).get('name')
    const name = src.text(nameEntry?.value)
    if (name === undefined || name === '') {
      src.report(nameEntry?.value ?? item, `${itemPath}.name`, 'a replaces entry needs a non-empty `name` of the rate_limit it replaces')
      ok = false
    } else if (name === ownName) {
      src.report(
        nameEntry?.value,
        `${itemPath}.name`,
        `replaces names this rule itself ("${name}"); name a rate_limit of another descriptor`,
      )
      ok = false
    } else {
      names.push(name)
    }
  })
  return ok ? names : undefined
}

function readLimits(src: YamlSource, entry: MapEntry, path: string, shadow: boolean): readonly Policy[] | undefined {
  const items = src.items(entry.value)
  if (items === undefined || items.length === 0) {
    src.report(
      entry.value ?? entry.keyNode,
      path,
      "expected a non-empty list of policies such as `- { algorithm: gcra, limit: 10, period: '1s' }`",
    )
    return undefined
  }
  const policies: Policy[] = []
  const seen = new Map<string, number>()
  items.forEach((item, i) => {
    const itemPath = `${path}[${i}]`
    const policy = readPolicy(src, item, itemPath, shadow)
    if (policy === undefined) return
    if (seen.has(policy.name)) {
      src.report(
        item,
        `${itemPath}.name`,
        `duplicate policy name "${policy.name}" (also limits[${seen.get(policy.name)}]); give each policy its own name`,
      )
      return
    }
    seen.set(policy.name, i)
    policies.push(policy)
  })
  if (policies.length !== items.length) return undefined
  const mixed = syncMismatch(policies)
  if (mixed !== undefined) {
    src.report(items[mixed], `${path}[${mixed}].sync`, syncMismatchMessage(policies, mixed))
    return undefined
  }
  return Object.freeze(policies)
}

/** Runs core `createPolicy` and maps its error ("<path>.<field>: message") back onto the YAML node. */
function readPolicy(src: YamlSource, node: Node | undefined, path: string, shadow: boolean): Policy | undefined {
  const entries = src.entries(node)
  if (entries === undefined) {
    src.report(node, path, "expected a policy mapping such as `{ algorithm: token-bucket, limit: 100, period: '1m', burst: 20 }`")
    return undefined
  }
  const options = src.plain(node) as PolicyOptions
  try {
    return createPolicy(shadow ? { ...options, shadow: true } : options, path)
  } catch (error) {
    if (!(error instanceof FloodgateError)) throw error
    const split = /^(\S*?): (.*)$/s.exec(error.message)
    const issuePath = split?.[1] ?? path
    const field = issuePath.startsWith(`${path}.`) ? issuePath.slice(path.length + 1) : undefined
    const at = entries.find((e) => e.key === field)
    src.report(at ? (at.value ?? at.keyNode) : node, issuePath, split?.[2] ?? error.message)
    return undefined
  }
}

/** Reports keys not in `known` and returns the known ones by name. */
function checkKeys(src: YamlSource, entries: MapEntry[], path: string, known: readonly string[]): Map<string, MapEntry> {
  const fields = new Map<string, MapEntry>()
  for (const entry of entries) {
    if (known.includes(entry.key)) {
      fields.set(entry.key, entry)
      continue
    }
    const where = path === '' ? entry.key : `${path}.${entry.key}`
    src.report(entry.keyNode, where, `unknown key "${entry.key}"${suggestion(entry.key, known)}; known keys here are ${known.join(', ')}`)
  }
  return fields
}

function readBoolean(src: YamlSource, entry: MapEntry | undefined, path: string): boolean {
  if (entry?.value === undefined) return false
  const value = src.scalar(entry.value)
  if (typeof value === 'boolean') return value
  src.report(entry.value, path, `must be true or false, got ${describeNode(src, entry.value)}`)
  return false
}

function describeNode(src: YamlSource, node: Node | undefined): string {
  const text = src.text(node)
  return text === undefined ? (node === undefined ? 'nothing' : 'a list or mapping') : JSON.stringify(text)
}

/** `, did you mean "x"?` for a near miss (edit distance ≤ 2), else the empty string. */
function suggestion(word: string, known: readonly string[]): string {
  let best: string | undefined
  let bestDistance = 3
  for (const candidate of known) {
    const distance = editDistance(word.toLowerCase(), candidate.toLowerCase())
    if (distance < bestDistance) {
      best = candidate
      bestDistance = distance
    }
  }
  return best === undefined ? '' : ` (did you mean "${best}"?)`
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const current = [i]
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1))
    }
    previous = current
  }
  return previous[b.length]
}
