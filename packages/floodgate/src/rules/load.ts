// Loads rules from text or from disk (one file, or every *.yaml/*.yml of a directory) as one snapshot.

import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { ConfigError, type ConfigIssue } from './errors.js'
import { RuleSet, type RuleSetOptions } from './rule-set.js'
import type { DescriptorConfig } from './config-tree.js'
import { readDomainFile, type DomainConfig } from './schema.js'
import { YamlSource } from './yaml-source.js'

/** One rules file's name (used in issues) and text. */
export interface RuleSource {
  file: string
  text: string
}

/**
 * Validates a set of rules files and builds one snapshot. Every file is checked in full and all
 * issues are reported together; any issue rejects the whole set (a half-loaded config is never
 * served). Each domain must be defined in exactly one file, unless `mergeDomains` merges its files.
 */
export function parseRules(sources: readonly RuleSource[], options: RuleSetOptions = {}): RuleSet {
  const issues: ConfigIssue[] = []
  if (sources.length === 0) {
    throw new ConfigError([{ file: '(none)', path: '', message: 'no rules files given; pass a YAML file or a directory of them' }])
  }
  const configs: DomainConfig[] = []
  const owners = new Map<string, DomainConfig>()
  // Which file each top-level descriptor of a merged domain came from, for duplicates' messages.
  const origin = new Map<DescriptorConfig, string>()
  for (const source of sources) {
    const config = readDomainFile(new YamlSource(source.file, source.text, issues))
    if (config === undefined) continue
    const owner = owners.get(config.domain)
    if (owner !== undefined && options.mergeDomains) {
      for (const descriptor of config.descriptors) origin.set(descriptor, config.file)
      const merged = mergeDomain(owner, config, issues, origin)
      owners.set(config.domain, merged)
      configs[configs.indexOf(owner)] = merged
      continue
    }
    if (owner !== undefined) {
      issues.push({
        file: config.file,
        line: config.line,
        path: 'domain',
        message:
          `duplicate domain "${config.domain}": already defined in ${owner.file}${owner.line ? `:${owner.line}` : ''}; ` +
          'keep each domain in one file',
      })
      continue
    }
    owners.set(config.domain, config)
    configs.push(config)
  }
  if (issues.length > 0) throw new ConfigError(issues)
  return new RuleSet(
    configs,
    sources.map((source) => source.file),
    options,
  )
}

/**
 * `config`'s descriptors added to those of the same domain read before, as upstream merges them; a
 * top-level key and value both define is reported at the second, with where the first is.
 */
function mergeDomain(
  owner: DomainConfig,
  config: DomainConfig,
  issues: ConfigIssue[],
  origin: Map<DescriptorConfig, string>,
): DomainConfig {
  const seen = new Map(owner.descriptors.map((d) => [`${d.key}\u0000${d.value ?? ''}`, d]))
  for (const descriptor of config.descriptors) {
    const first = seen.get(`${descriptor.key}\u0000${descriptor.value ?? ''}`)
    if (first === undefined) continue
    const where = `${origin.get(first) ?? owner.file}${first.line ? `:${first.line}` : ''}`
    issues.push({
      file: config.file,
      line: descriptor.line,
      path: 'descriptors',
      message:
        `duplicate descriptor ${descriptor.key}${descriptor.value === undefined ? '' : `=${descriptor.value}`} ` +
        `of domain "${config.domain}": already defined in ${where}`,
    })
  }
  return { ...owner, descriptors: [...owner.descriptors, ...config.descriptors] }
}

/**
 * Loads a rules file, or every `*.yaml` / `*.yml` file directly inside a directory (not
 * recursive; sorted by name; names starting with `.` skipped, which also skips editor swap files
 * and the `..data` folders of Kubernetes ConfigMap mounts while following their symlinks).
 * Throws ConfigError for unreadable files as well as invalid ones.
 */
export function loadRules(path: string, options: RuleSetOptions = {}): RuleSet {
  return parseRules(readRuleSources(path), options)
}

/** Reads the files `loadRules` would load, without validating them. Throws ConfigError if unreadable. */
export function readRuleSources(path: string): RuleSource[] {
  const stat = tryFs(path, () => statSync(path))
  if (!stat.isDirectory()) return [{ file: path, text: tryFs(path, () => readFileSync(path, 'utf8')) }]
  const names = tryFs(path, () => readdirSync(path))
    .filter((name) => !name.startsWith('.') && /\.ya?ml$/i.test(name))
    .sort()
  const sources: RuleSource[] = []
  for (const name of names) {
    const file = join(path, name)
    if (!tryFs(file, () => statSync(file)).isFile()) continue
    sources.push({ file, text: tryFs(file, () => readFileSync(file, 'utf8')) })
  }
  if (sources.length === 0) {
    throw new ConfigError([{ file: path, path: '', message: 'the directory holds no *.yaml or *.yml files; add at least one rules file' }])
  }
  return sources
}

function tryFs<T>(file: string, read: () => T): T {
  try {
    return read()
  } catch (error) {
    const reason =
      (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file or directory; check the path' : (error as Error).message
    throw new ConfigError([{ file, path: '', message: `cannot read rules: ${reason}` }])
  }
}
