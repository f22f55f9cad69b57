// Runs every test file under packages/*/test/ and test/ (what spans the packages: the consumer test)
// with node's test runner, two files at a time, on the compiled copy of the tree that
// compile-tests.mjs makes in .test-build/ (why: see there). Paths given as arguments run alone.
// Node 20's `--test` does not expand globs, so the file list is built here. The workspace packages
// resolve through the `floodgate-source` export condition, so no package build is needed.
import { readdirSync, statSync } from 'node:fs'
import { join, relative, resolve } from 'node:path'
import { spawnSync } from 'node:child_process'
import { compileTests } from './compile-tests.mjs'

function findTests(dir) {
  const out = []
  for (const name of readdirSync(dir)) {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) out.push(...findTests(path))
    else if (name.endsWith('.test.ts')) out.push(path)
  }
  return out
}

const repository = resolve(import.meta.dirname, '..')
const only = process.argv.slice(2).map((path) => relative(repository, resolve(path)))
const roots = [...readdirSync(join(repository, 'packages')).map((name) => join('packages', name, 'test')), 'test']
const files = (
  only.length > 0 ? only : roots.flatMap((root) => findTests(join(repository, root)).map((path) => relative(repository, path)))
).sort()
const build = await compileTests(repository)
const result = spawnSync(
  process.execPath,
  [
    '--conditions=floodgate-source',
    '--enable-source-maps',
    '--test',
    '--test-concurrency=2',
    '--test-timeout=600000',
    ...files.map((file) => file.replace(/\.ts$/, '.js')),
  ],
  // Tests that need the checkout itself, not its compiled copy (the consumer test packs it), find it here.
  { stdio: 'inherit', cwd: build, env: { ...process.env, FLOODGATE_REPOSITORY: repository } },
)
process.exit(result.status ?? 1)
