// The descriptor matcher: per-level maps for exact values, precompiled wildcard patterns, key-only defaults.

import type { DescriptorConfig, RuleTemplate } from './schema.js'

/** A request descriptor entry, as Envoy sends it. */
export interface DescriptorEntry {
  key: string
  value: string
}

/**
 * How wildcard values of one key are tried: `file` (upstream: the first pattern in file order
 * that matches) or `specific` (the pattern with the most literal characters first, file order
 * between equals).
 */
export type WildcardOrder = 'file' | 'specific'

/** One level of the config tree, indexed for lookup. */
export interface Level {
  /** key → value → node; every value entry is here, wildcard ones too (a literal `*` in a request matches itself). */
  readonly exact: ReadonlyMap<string, ReadonlyMap<string, CompiledNode>>
  /** key → wildcard entries, in the order they are tried. */
  readonly wildcards: ReadonlyMap<string, readonly WildcardBranch[]>
  /** key → the entry written with that key and no value. */
  readonly keyOnly: ReadonlyMap<string, CompiledNode>
}

export interface CompiledNode {
  readonly rule: RuleTemplate | undefined
  readonly children: Level | undefined
  /** The value as written in the config (`undefined` for a key-only entry). */
  readonly value: string | undefined
  readonly valueToMetric: boolean
  readonly shareThreshold: boolean
  /** Some node on the way here or this one changes the metric key (value_to_metric, share_threshold). */
  readonly keyedMetric: boolean
}

interface WildcardBranch {
  readonly glob: Glob
  readonly node: CompiledNode
}

/** The rule a request descriptor matched, and what the path to it says about its keys. */
export interface RuleMatch {
  readonly template: RuleTemplate
  /**
   * Per entry, the wildcard pattern that stands for the request's value in the counter key
   * (`share_threshold`), or `undefined`; the whole array is `undefined` when no entry shares.
   */
  readonly shared: readonly (string | undefined)[] | undefined
  /** The stats key upstream gives the hit (`domain.key_value…`), see `metricKeyOf`. */
  readonly metricKey: string
}

/** Builds the lookup structure of one level (and, recursively, of every level under it). */
export function compileLevel(
  descriptors: readonly DescriptorConfig[],
  order: WildcardOrder = 'file',
  keyedAbove = false,
): Level | undefined {
  if (descriptors.length === 0) return undefined
  const exact = new Map<string, Map<string, CompiledNode>>()
  const wildcards = new Map<string, WildcardBranch[]>()
  const keyOnly = new Map<string, CompiledNode>()
  for (const descriptor of descriptors) {
    const keyedMetric = keyedAbove || descriptor.valueToMetric || descriptor.shareThreshold
    const node: CompiledNode = {
      rule: descriptor.rule,
      children: compileLevel(descriptor.descriptors, order, keyedMetric),
      value: descriptor.value,
      valueToMetric: descriptor.valueToMetric,
      shareThreshold: descriptor.shareThreshold,
      keyedMetric,
    }
    if (descriptor.value === undefined) {
      keyOnly.set(descriptor.key, node)
      continue
    }
    let values = exact.get(descriptor.key)
    if (values === undefined) exact.set(descriptor.key, (values = new Map()))
    values.set(descriptor.value, node)
    if (descriptor.value.includes('*')) {
      let list = wildcards.get(descriptor.key)
      if (list === undefined) wildcards.set(descriptor.key, (list = []))
      list.push({ glob: compileGlob(descriptor.value), node })
    }
  }
  // `specific`: most literal characters first ("192.168.1.*" before "192.168.*"). Array sort is
  // stable, so equally specific patterns keep their file order.
  if (order === 'specific') {
    for (const list of wildcards.values()) list.sort((a, b) => b.glob.literalLength - a.glob.literalLength)
  }
  return { exact, wildcards, keyOnly }
}

/** How one entry of the request was matched. */
type Via = 'exact' | 'wildcard' | 'key'

// Scratch for the walk of one findRule call (it never re-enters itself), so a plain match allocates nothing.
const walkNodes: CompiledNode[] = []
const walkVia: Via[] = []

/**
 * Finds the rule for one request descriptor. At each level the entry is looked up as exact
 * key+value, then a wildcard value (in the level's order), then the key alone; the first hit is
 * taken (no backtracking to a less specific sibling, as in envoyproxy/ratelimit). The rule
 * applies only if the request ends exactly at that depth of the tree.
 */
export function findRule(level: Level | undefined, domain: string, entries: readonly DescriptorEntry[]): RuleMatch | undefined {
  let current = level
  for (let i = 0; i < entries.length; i++) {
    if (current === undefined) return undefined
    const { key, value } = entries[i]
    let via: Via = 'exact'
    let node = current.exact.get(key)?.get(value)
    if (node === undefined) {
      via = 'wildcard'
      node = matchWildcard(current.wildcards.get(key), value)
    }
    if (node === undefined) {
      via = 'key'
      node = current.keyOnly.get(key)
    }
    if (node === undefined) return undefined
    walkNodes[i] = node
    walkVia[i] = via
    if (i === entries.length - 1) {
      const template = node.rule
      if (template === undefined) return undefined
      if (!node.keyedMetric && !template.detailedMetric) return { template, shared: undefined, metricKey: template.id }
      return keyedMatch(template, domain, entries)
    }
    current = node.children
  }
  return undefined
}

function matchWildcard(branches: readonly WildcardBranch[] | undefined, value: string): CompiledNode | undefined {
  if (branches === undefined) return undefined
  for (const branch of branches) if (globMatches(branch.glob, value)) return branch.node
  return undefined
}

/** The match of a path with share_threshold, value_to_metric or detailed_metric, read from the walk just made. */
function keyedMatch(template: RuleTemplate, domain: string, entries: readonly DescriptorEntry[]): RuleMatch {
  let shared: (string | undefined)[] | undefined
  for (let i = 0; i < entries.length; i++) {
    if (walkVia[i] === 'wildcard' && walkNodes[i].shareThreshold) {
      shared ??= new Array<string | undefined>(entries.length).fill(undefined)
      shared[i] = walkNodes[i].value
    }
  }
  let metricKey = domain
  for (let i = 0; i < entries.length; i++) {
    const { key, value } = entries[i]
    const node = walkNodes[i]
    let shown: string
    if (template.detailedMetric) {
      // Every level by the request's own value (a shared level by its pattern), as upstream's detailed key.
      shown = shared?.[i] ?? (shared === undefined || value !== '' ? value : '')
      metricKey += shared === undefined || shown !== '' ? `.${key}_${shown}` : `.${key}`
      continue
    }
    if (walkVia[i] === 'wildcard')
      shown = node.shareThreshold ? (node.value as string) : node.valueToMetric ? value : (node.value as string)
    else if (walkVia[i] === 'exact') shown = value
    else shown = node.valueToMetric ? value : ''
    metricKey += shown === '' ? `.${key}` : `.${key}_${shown}`
  }
  return { template, shared, metricKey }
}

/** A value pattern split at its `*`s, each matching zero or more characters. */
interface Glob {
  readonly parts: readonly string[]
  readonly literalLength: number
}

function compileGlob(pattern: string): Glob {
  const parts = pattern.split('*')
  return { parts, literalLength: pattern.length - (parts.length - 1) }
}

/** Anchored glob match without building a RegExp: prefix, suffix, then the middle parts in order. */
function globMatches(glob: Glob, value: string): boolean {
  const { parts } = glob
  if (value.length < glob.literalLength) return false
  const first = parts[0]
  const last = parts[parts.length - 1]
  if (!value.startsWith(first) || !value.endsWith(last)) return false
  let position = first.length
  const end = value.length - last.length
  for (let i = 1; i < parts.length - 1; i++) {
    const found = value.indexOf(parts[i], position)
    if (found < 0 || found + parts[i].length > end) return false
    position = found + parts[i].length
  }
  return position <= end
}
