// Copies the non-TypeScript files a package reads at run time (.lua, .proto) from src/ into dist/,
// keeping their folders, since tsc copies only what it compiles.
import { cpSync, readdirSync, statSync } from 'node:fs'
import { join, relative } from 'node:path'

const [from, to, ...extensions] = process.argv.slice(2)
if (!from || !to || extensions.length === 0) {
  console.error('usage: node copy-assets.mjs <src> <dist> <.ext> [.ext…]')
  process.exit(2)
}

function copyAll(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) copyAll(path)
    else if (extensions.some((extension) => name.endsWith(extension))) cpSync(path, join(to, relative(from, path)))
  }
}
copyAll(from)
