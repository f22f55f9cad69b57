// Puts the repository's LICENSE (and, for the library, README.md, CHANGELOG.md, docs/ and examples/) into a
// package folder before `npm pack`, so that what npm users get carries the docs its links point to.
import { cpSync, existsSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const [target, flag] = process.argv.slice(2)
const names = flag === '--license-only' ? ['LICENSE'] : ['LICENSE', 'README.md', 'CHANGELOG.md', 'docs', 'examples']
for (const name of names) {
  // examples/: the rules files the README links, not the TypeScript demo, which runs only in the repository.
  // docs/: all of it, the charts, screenshot, Grafana JSON and API reference (docs/api/) included, since
  // the guides link them; the consumer test holds the package's size and checks every link.
  const filter = (path) => statSync(path).isDirectory() || name !== 'examples' || /\.ya?ml$/.test(path)
  if (existsSync(join(root, name))) cpSync(join(root, name), join(target, name), { recursive: true, filter })
}
