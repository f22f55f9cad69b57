// Reads one YAML rules file into nodes that know their line, and collects issues against them.

import { createRequire } from 'node:module'
import type { Document, LineCounter, Node } from 'yaml'
import { FloodgateError } from '../core/errors.js'
import type { ConfigIssue } from './errors.js'

type YamlModule = typeof import('yaml')

// `yaml` is an optional peer of the library: only rules files need it, and it would be a third of
// what the library adds to an app that never reads one. It is loaded at the first rules file, from
// the app's node_modules (synchronously, so loadRules and RuleWatcher stay synchronous).
const requireFromHere = createRequire(import.meta.url)

/** The app's `yaml` package; throws a FloodgateError saying what to install when it is missing. */
export function loadYaml(load: (name: string) => unknown = requireFromHere): YamlModule {
  try {
    return load('yaml') as YamlModule
  } catch (error) {
    const missing = (error as { code?: unknown }).code === 'MODULE_NOT_FOUND' && String((error as Error).message).includes("'yaml'")
    if (!missing) throw error
    throw new FloodgateError(
      'INVALID_OPTION',
      'rules files are YAML, read with the yaml package, which this app does not have: npm i yaml ' +
        '(floodgate-server brings it; for the library it is an optional peer, so that apps without rules files do not carry it)',
    )
  }
}

/** One `key: value` of a YAML mapping, with aliases resolved and `<<` merge keys applied. */
export interface MapEntry {
  key: string
  keyNode: Node
  /** `undefined` for an empty value (`key:`), which YAML reads as null. */
  value: Node | undefined
}

/**
 * A parsed YAML file plus the issue list it reports into. Every `report` call pins the issue to
 * the node's line and column, found with the `yaml` package's `LineCounter`.
 */
export class YamlSource {
  readonly file: string
  /** The document's top node; `undefined` when the file is empty or did not parse. */
  readonly root: Node | undefined
  /** The text is not valid YAML (the parse errors are already reported). */
  readonly malformed: boolean
  readonly issues: ConfigIssue[]
  private readonly yaml: YamlModule
  private readonly lines: LineCounter
  private readonly doc: Document.Parsed

  constructor(file: string, text: string, issues: ConfigIssue[]) {
    this.yaml = loadYaml()
    this.file = file
    this.issues = issues
    this.lines = new this.yaml.LineCounter()
    this.doc = this.yaml.parseDocument(text, { lineCounter: this.lines, prettyErrors: false, uniqueKeys: true })
    for (const error of this.doc.errors) {
      const message =
        error.code === 'MULTIPLE_DOCS'
          ? 'a rules file holds one domain; put each `---` document in a file of its own'
          : `malformed YAML: ${error.message}`
      this.reportAt(error.pos[0], '', message)
    }
    this.malformed = this.doc.errors.length > 0
    this.root = this.malformed ? undefined : this.resolve(this.doc.contents)
  }

  /** The 1-based line a node starts on. */
  lineOf(node: Node | undefined): number | undefined {
    const offset = node?.range?.[0]
    return offset === undefined ? undefined : this.lines.linePos(offset).line
  }

  /** Adds an issue located at `node` (or the file's start when there is no node). */
  report(node: Node | undefined, path: string, message: string): void {
    this.reportAt(node?.range?.[0], path, message)
  }

  private reportAt(offset: number | undefined, path: string, message: string): void {
    if (offset === undefined) {
      this.issues.push({ file: this.file, path, message })
      return
    }
    const { line, col } = this.lines.linePos(offset)
    this.issues.push({ file: this.file, line, column: col, path, message })
  }

  /** Follows `*alias` references to the anchored node; a null scalar counts as absent. */
  resolve(node: Node | undefined | null): Node | undefined {
    let current = node ?? undefined
    for (let hops = 0; current !== undefined && this.yaml.isAlias(current) && hops < 64; hops++) {
      current = current.resolve(this.doc) ?? undefined
    }
    if (current !== undefined && this.yaml.isScalar(current) && current.value === null) return undefined
    return current
  }

  /**
   * The entries of a mapping, or `undefined` if the node is not one. `<<: *anchor` merge keys
   * (YAML 1.1, accepted by envoyproxy/ratelimit's Go parser) contribute the entries the mapping
   * does not set itself.
   */
  entries(node: Node | undefined): MapEntry[] | undefined {
    if (node === undefined || !this.yaml.isMap(node)) return undefined
    const own: MapEntry[] = []
    const merged: MapEntry[] = []
    for (const pair of node.items) {
      const keyNode = pair.key as Node
      const key = this.yaml.isScalar(keyNode) ? String(keyNode.source ?? keyNode.value) : ''
      const value = this.resolve(pair.value as Node | null)
      if (key === '<<' && value !== undefined) {
        const sources = this.yaml.isSeq(value) ? value.items.map((item) => this.resolve(item as Node)) : [value]
        for (const source of sources) merged.push(...(this.entries(source) ?? []))
        continue
      }
      own.push({ key, keyNode, value })
    }
    const ownKeys = new Set(own.map((entry) => entry.key))
    return [...own, ...merged.filter((entry) => !ownKeys.has(entry.key))]
  }

  /** The items of a sequence (aliases resolved), or `undefined` if the node is not one. */
  items(node: Node | undefined): (Node | undefined)[] | undefined {
    if (node === undefined || !this.yaml.isSeq(node)) return undefined
    return node.items.map((item) => this.resolve(item as Node))
  }

  /**
   * A scalar's text as written (`value: 10` gives "10", as the Go loader reads it into a string
   * field), or `undefined` if the node is a mapping or sequence.
   */
  text(node: Node | undefined): string | undefined {
    if (node === undefined || !this.yaml.isScalar(node)) return undefined
    return typeof node.value === 'string' ? node.value : String(node.source ?? node.value)
  }

  /** A scalar's parsed value (number, boolean, string), or `undefined` for collections. */
  scalar(node: Node | undefined): unknown {
    return node !== undefined && this.yaml.isScalar(node) ? node.value : undefined
  }

  /** A collection rebuilt as plain JSON-like data, for handing to option validators. */
  plain(node: Node | undefined): unknown {
    if (node === undefined) return undefined
    const entries = this.entries(node)
    if (entries) return Object.fromEntries(entries.map((entry) => [entry.key, this.plain(entry.value)]))
    const items = this.items(node)
    if (items) return items.map((item) => this.plain(item))
    return this.scalar(node)
  }
}
