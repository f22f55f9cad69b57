// Hot reload: watches a rules file or directory and swaps in a new snapshot only when it is valid.

import { EventEmitter } from 'node:events'
import { createHash } from 'node:crypto'
import { statSync, watch, type FSWatcher } from 'node:fs'
import { basename, dirname } from 'node:path'
import { ConfigError } from './errors.js'
import { parseRules, readRuleSources, type RuleSource } from './load.js'
import type { RuleSet, RuleSetOptions } from './rule-set.js'

export interface RuleWatcherOptions extends RuleSetOptions {
  /** Quiet time after the last file event before reloading, so a burst of writes loads once (default 100ms). */
  debounceMs?: number
}

/** How long to wait before watching again after the watched directory went away. */
const REWATCH_MS = 1_000

/**
 * Keeps `current` in step with a rules file or directory.
 *
 * It watches the *directory* (the file's parent, or the directory itself), because editors and
 * Kubernetes replace files by renaming a new one over the old, which a watch on the file itself
 * would miss. After a burst of events it re-reads the files; when the content changed and is
 * valid it swaps `current` in one assignment and emits `'reload'` with the new RuleSet. When the
 * new content is invalid it emits `'error'` with the ConfigError (file, line, path of every
 * issue) and the previous snapshot keeps serving. Its own work never throws: without an `'error'`
 * listener the error is only kept in `lastError`.
 *
 * The constructor loads synchronously and throws ConfigError if the initial rules are invalid
 * (a service should not start without rules). The watch keeps the process alive until `close()`.
 */
export class RuleWatcher extends EventEmitter {
  readonly path: string
  /** The error of the latest failed reload, cleared by the next successful one. */
  lastError: ConfigError | undefined
  #current: RuleSet
  #seen: string
  #debounceMs: number
  readonly #ruleOptions: RuleSetOptions
  #timer: NodeJS.Timeout | undefined
  #watcher: FSWatcher | undefined
  #closed = false

  constructor(path: string, options: RuleWatcherOptions = {}) {
    super()
    this.path = path
    this.#debounceMs = options.debounceMs ?? 100
    this.#ruleOptions = { wildcardOrder: options.wildcardOrder, mergeDomains: options.mergeDomains }
    const sources = readRuleSources(path)
    this.#current = parseRules(sources, this.#ruleOptions)
    this.#seen = fingerprint(sources)
    this.#watch()
  }

  /** The snapshot to use now; replaced whole on every successful reload. */
  get current(): RuleSet {
    return this.#current
  }

  /**
   * Re-reads the rules now (e.g. on SIGHUP or an admin call) instead of waiting for a file event.
   * Returns true when the snapshot in `current` reflects the files (changed or not).
   */
  reload(): boolean {
    let next: RuleSet
    try {
      let sources: RuleSource[]
      try {
        sources = readRuleSources(this.path)
      } catch (error) {
        this.#seen = '' // unreadable: whatever comes back next must be loaded, even the old bytes
        throw error
      }
      const print = fingerprint(sources)
      // The same bytes as last time: nothing to do (file events often come in pairs).
      if (print === this.#seen) return this.lastError === undefined
      this.#seen = print
      next = parseRules(sources, this.#ruleOptions)
    } catch (error) {
      this.#fail(error)
      return false
    }
    this.#current = next
    this.lastError = undefined
    this.emit('reload', next)
    return true
  }

  /** Stops watching. Pending reloads are dropped. */
  async close(): Promise<void> {
    this.#closed = true
    clearTimeout(this.#timer)
    this.#watcher?.close()
    this.#watcher = undefined
  }

  #watch(): void {
    if (this.#closed) return
    const isDirectory = statSync(this.path, { throwIfNoEntry: false })?.isDirectory() ?? false
    const target = isDirectory ? this.path : dirname(this.path)
    const name = basename(this.path)
    try {
      this.#watcher = watch(target, (_event, changed) => {
        // In a parent directory, only the file itself or a Kubernetes `..data` swap concerns us.
        if (isDirectory || changed === null || changed === name || changed.startsWith('..')) this.#schedule()
      })
    } catch (error) {
      this.#fail(error)
      this.#timer = setTimeout(() => this.#watch(), REWATCH_MS)
      return
    }
    this.#watcher.on('error', (error) => {
      this.#watcher?.close()
      this.#watcher = undefined
      this.#fail(error)
      this.#timer = setTimeout(() => {
        this.#watch()
        this.#schedule()
      }, REWATCH_MS)
    })
  }

  #schedule(): void {
    if (this.#closed) return
    clearTimeout(this.#timer)
    this.#timer = setTimeout(() => {
      if (!this.#closed) this.reload()
    }, this.#debounceMs)
  }

  #fail(error: unknown): void {
    const configError =
      error instanceof ConfigError
        ? error
        : new ConfigError([{ file: this.path, path: '', message: `cannot watch rules: ${(error as Error).message}` }])
    this.lastError = configError
    if (this.listenerCount('error') > 0) this.emit('error', configError)
  }
}

export interface RuleWatcher {
  on(event: 'reload', listener: (rules: RuleSet) => void): this
  on(event: 'error', listener: (error: ConfigError) => void): this
  once(event: 'reload', listener: (rules: RuleSet) => void): this
  once(event: 'error', listener: (error: ConfigError) => void): this
  off(event: 'reload', listener: (rules: RuleSet) => void): this
  off(event: 'error', listener: (error: ConfigError) => void): this
}

function fingerprint(sources: readonly RuleSource[]): string {
  const hash = createHash('sha256')
  for (const source of sources) hash.update(`${source.file}\0${source.text}\0`)
  return hash.digest('hex')
}
