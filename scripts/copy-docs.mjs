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
  // docs/: the text, not the charts, screenshot and Grafana JSON (a third of the docs' bytes), which
  // stay in the repository: the library's install size is part of its promise to an Express app.
  const filter = (path) => {
    if (statSync(path).isDirectory()) return name !== 'docs' || !path.endsWith('grafana')
    if (name === 'examples') return /\.ya?ml$/.test(path)
    return name !== 'docs' || !/\.(svg|png)$/.test(path)
  }
  if (existsSync(join(root, name))) cpSync(join(root, name), join(target, name), { recursive: true, filter })
}
