// Validates one rules file (envoyproxy/ratelimit YAML + Floodgate `limits:`) into a typed domain tree.
// The tree's types are in config-tree.ts; `rate_limit:` is read in envoy-limit.ts, `limits:` in floodgate-limits.ts.

import type { Node } from 'yaml'
import type { DescriptorConfig, DomainConfig, RuleTemplate } from './config-tree.js'
import { readRateLimit } from './envoy-limit.js'
import { readLimits } from './floodgate-limits.js'
import { checkKeys, readBoolean } from './schema-checks.js'
import type { MapEntry, YamlSource } from './yaml-source.js'

export type { DescriptorConfig, DomainConfig, RuleTemplate } from './config-tree.js'
export { envoyPolicyName } from './envoy-limit.js'

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
