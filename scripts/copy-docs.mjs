// Puts the repository's LICENSE (and, for the library, README.md, CHANGELOG.md and docs/) into a
// package folder before `npm pack`, so that what npm users get carries the docs its links point to.
import { cpSync, existsSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const [target, flag] = process.argv.slice(2)
const names = flag === '--license-only' ? ['LICENSE'] : ['LICENSE', 'README.md', 'CHANGELOG.md', 'docs']
for (const name of names) {
  if (existsSync(join(root, name))) cpSync(join(root, name), join(target, name), { recursive: true })
}
