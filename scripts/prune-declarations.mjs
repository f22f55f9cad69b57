// Deletes the declaration files (.d.ts) of a package's dist/ that no entry point's types reach.
// tsc emits one per module, internal ones included, and the library's apparent size on a user's disk
// is held to 2 MB with its docs (test/consumer): types nobody can name are bytes with no reader.
// What is kept is found the way the compiler finds it, from each `types` of package.json's exports.
//
//   node prune-declarations.mjs <package dir>
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { dirname, join, normalize } from 'node:path'
import ts from 'typescript'

const [dir] = process.argv.slice(2)
if (!dir) {
  console.error('usage: node prune-declarations.mjs <package dir>')
  process.exit(2)
}

const entries = []
const collect = (value, key) => {
  if (typeof value === 'string' && key === 'types') entries.push(normalize(join(dir, value)))
  else if (value !== null && typeof value === 'object') for (const [k, v] of Object.entries(value)) collect(v, k)
}
collect(JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).exports)

const reached = new Set()
const pending = [...entries]
while (pending.length > 0) {
  const file = pending.pop()
  if (reached.has(file)) continue
  if (!existsSync(file)) throw new Error(`${file}: a declaration named by an export or an import is missing`)
  reached.add(file)
  const { importedFiles } = ts.preProcessFile(readFileSync(file, 'utf8'), true, true)
  for (const { fileName } of importedFiles) {
    if (!fileName.startsWith('.')) continue
    pending.push(normalize(join(dirname(file), fileName.replace(/\.js$/, '.d.ts'))))
  }
}

let pruned = 0
const prune = (folder) => {
  for (const entry of readdirSync(folder, { withFileTypes: true })) {
    const path = join(folder, entry.name)
    if (entry.isDirectory()) prune(path)
    else if (entry.name.endsWith('.d.ts') && !reached.has(normalize(path))) {
      rmSync(path)
      pruned++
    }
  }
}
prune(join(dir, 'dist'))
console.log(`prune-declarations: kept ${reached.size} declaration files, deleted ${pruned} no export reaches`)
