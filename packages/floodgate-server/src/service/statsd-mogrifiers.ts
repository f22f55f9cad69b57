// DogStatsD mogrifiers, as envoyproxy/ratelimit reads them: a named rule that rewrites a stat's name
// and turns parts of it into tags (DOG_STATSD_MOGRIFIER_<NAME>_PATTERN, _NAME and _TAGS).

import { FloodgateError } from 'floodgate'

/** One rule: names matching `pattern` become `name`, with `tags`; `$0`, `$1`… stand for the match's groups. */
export interface Mogrifier {
  readonly label: string
  readonly pattern: RegExp
  readonly name: string
  readonly tags: readonly (readonly [string, string])[]
}

const PREFIX = 'DOG_STATSD_MOGRIFIER'
const GROUP_REFERENCE = /\$\d+/g

/**
 * Reads the mogrifiers named in `labels` (USE_DOG_STATSD_MOGRIFIERS), in that order, from `env`.
 * Throws FloodgateError (INVALID_OPTION) for what upstream refuses at start: a missing pattern or
 * name, a pattern that does not compile, a tag without a key or a value.
 */
export function readMogrifiers(labels: readonly string[], env: NodeJS.ProcessEnv): Mogrifier[] {
  return labels.map((label) => {
    const variable = (part: string) => `${PREFIX}_${label}_${part}`
    const fail = (message: string) => new FloodgateError('INVALID_OPTION', `mogrifier ${label}: ${message}`)
    const source = env[variable('PATTERN')] ?? ''
    if (source === '') throw fail(`no pattern: set ${variable('PATTERN')}`)
    let pattern: RegExp
    try {
      // Go's named groups (?P<name>…) are (?<name>…) in JavaScript; the rest of RE2 reads the same.
      pattern = new RegExp(source.replaceAll('(?P<', '(?<'))
    } catch (error) {
      throw fail(`${variable('PATTERN')}=${source} does not compile: ${(error as Error).message}`)
    }
    const name = env[variable('NAME')] ?? ''
    if (name === '') throw fail(`no name: set ${variable('NAME')}`)
    const tags: [string, string][] = []
    for (const pair of (env[variable('TAGS')] ?? '').split(',')) {
      if (pair === '') continue
      const at = pair.indexOf(':')
      const key = at < 0 ? pair : pair.slice(0, at)
      const value = at < 0 ? '' : pair.slice(at + 1)
      if (key === '') throw fail(`${variable('TAGS')}: a tag has no key in ${JSON.stringify(pair)}`)
      if (value === '') throw fail(`${variable('TAGS')}: tag ${key} has no value`)
      tags.push([key, value])
    }
    return { label, pattern, name, tags }
  })
}

/**
 * The first mogrifier matching `name` rewrites it: its name and `key:value` tags with the groups
 * filled in. A name no mogrifier matches is kept, with no tags.
 */
export function mogrify(mogrifiers: readonly Mogrifier[], name: string): { name: string; tags: string[] } {
  for (const mogrifier of mogrifiers) {
    const match = mogrifier.pattern.exec(name)
    if (match === null) continue
    const fill = (template: string) =>
      template.replace(GROUP_REFERENCE, (reference) => {
        const index = Number(reference.slice(1))
        // As upstream: a group past the last is left as written; one that did not take part is empty.
        return index < match.length ? (match[index] ?? '') : reference
      })
    return { name: fill(mogrifier.name), tags: mogrifier.tags.map(([key, value]) => `${key}:${fill(value)}`) }
  }
  return { name, tags: [] }
}
