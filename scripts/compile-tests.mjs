// Builds the tree the test runner runs: a copy of the repository in .test-build/ where every
// TypeScript file also exists as the JavaScript esbuild makes of it, and the workspace packages
// export that JavaScript.
//
// Why: with `--import tsx`, each of the ~120 test processes sends every module it loads through
// loader hooks on another thread; that cost one to three seconds of CPU per file, most of the
// suite's time on a two-core machine. tsx transpiles with esbuild too, file by file, so the code
// that runs is the same. The TypeScript files are kept beside their JavaScript, so a child process
// a test starts with `--import tsx` on a .ts path still finds it, and tests that read the
// repository's other files (docs, examples, Lua scripts, protos) find them where they expect.
// The algorithms' generated forms (gitignored build output) are brought up to date in the checkout
// first, so the copy runs what the definitions make today, as a build does.

import { cpSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { transform } from 'esbuild'
import { writeGenerated } from './gen-algorithms.mjs'

const SKIP = new Set(['node_modules', '.git', '.test-build', 'dist', 'test-artifacts', '.tmp'])

/** Every file under `dir` (relative paths), but what SKIP names and .tgz packs. */
function walk(root, dir = '') {
  const files = []
  for (const name of readdirSync(join(root, dir))) {
    if (SKIP.has(name) || name.endsWith('.tgz')) continue
    const path = join(dir, name)
    if (statSync(join(root, path)).isDirectory()) files.push(...walk(root, path))
    else files.push(path)
  }
  return files
}

/** A workspace manifest whose every export, under any condition, is the compiled source. */
function exportingSource(manifest) {
  const exports = {}
  for (const [path, entry] of Object.entries(manifest.exports)) {
    const source = typeof entry === 'object' ? entry['floodgate-source'] : undefined
    exports[path] = source ? source.replace(/\.ts$/, '.js') : entry
  }
  return { ...manifest, exports }
}

/** Copies `root` into `root`/.test-build with each .ts file compiled beside itself; returns the build's path. */
export async function compileTests(root) {
  const out = join(root, '.test-build')
  rmSync(out, { recursive: true, force: true })
  writeGenerated()
  await Promise.all(
    walk(root).map(async (file) => {
      const target = join(out, file)
      mkdirSync(dirname(target), { recursive: true })
      cpSync(join(root, file), target)
      if (!file.endsWith('.ts') || file.endsWith('.d.ts')) return
      const { code } = await transform(readFileSync(join(root, file), 'utf8'), {
        loader: 'ts',
        format: 'esm',
        target: 'node22',
        sourcemap: 'inline',
        sourcefile: join(root, file),
      })
      writeFileSync(target.replace(/\.ts$/, '.js'), code)
    }),
  )
  // The build's node_modules: its own workspace packages, and a link to everything else installed.
  const workspaces = new Map()
  for (const pkg of readdirSync(join(root, 'packages'))) {
    const manifestPath = join(out, 'packages', pkg, 'package.json')
    const manifest = exportingSource(JSON.parse(readFileSync(manifestPath, 'utf8')))
    writeFileSync(manifestPath, JSON.stringify(manifest, null, 2))
    workspaces.set(manifest.name, join(out, 'packages', pkg))
    // A dependency npm placed under the package rather than at the root.
    const nested = join(root, 'packages', pkg, 'node_modules')
    if (existsSync(nested)) symlinkSync(nested, join(out, 'packages', pkg, 'node_modules'))
  }
  mkdirSync(join(out, 'node_modules'))
  for (const name of readdirSync(join(root, 'node_modules'))) {
    const target = workspaces.get(name) ?? join(root, 'node_modules', name)
    symlinkSync(target, join(out, 'node_modules', name))
  }
  // The command runs as installed: bin/floodgate.js imports dist/cli.js where src/cli.ts is absent,
  // rather than starting tsx for the sources.
  const server = join(out, 'packages/floodgate-server')
  rmSync(join(server, 'src/cli.ts'))
  mkdirSync(join(server, 'dist'))
  writeFileSync(join(server, 'dist/cli.js'), "export * from '../src/cli.js'\n")
  return out
}
