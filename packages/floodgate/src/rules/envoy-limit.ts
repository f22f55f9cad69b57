// Reads a descriptor's envoyproxy/ratelimit-style `rate_limit:` (unit, requests_per_unit, unlimited, name, replaces).

import type { Node } from 'yaml'
import { createPolicy } from '../core/policy.js'
import type { RuleTemplate } from './config-tree.js'
import { checkKeys, describeNode, readBoolean, suggestion } from './schema-checks.js'
import { ENVOY_UNITS, UNIT_MS, parseUnit, type EnvoyUnit } from './units.js'
import type { MapEntry, YamlSource } from './yaml-source.js'

const RATE_LIMIT_KEYS = ['unit', 'requests_per_unit', 'unlimited', 'name', 'replaces']
const REPLACES_KEYS = ['name']
const UNIT_LIST = `${ENVOY_UNITS.join(', ')} (any case)`

/** @internal The fields a rule takes from its descriptor, whatever its kind of limit. */
export type RuleBase = Pick<RuleTemplate, 'id' | 'shadow' | 'detailedMetric' | 'quota' | 'metadata'>

/**
 * Reads `rate_limit:` into a rule, reporting every issue into the source.
 * @internal (kept out of the .d.ts, as readDomainFile: its YamlSource would name `yaml`'s types)
 */
export function readRateLimit(src: YamlSource, entry: MapEntry, path: string, base: RuleBase): RuleTemplate | undefined {
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
