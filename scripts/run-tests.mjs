// Runs every test file under packages/*/test/ and test/ (what spans the packages: the consumer test)
// with node's test runner (via tsx), two files at a time.
// Node 20's `--test` does not expand globs, so the file list is built here. The workspace packages
// resolve to their TypeScript sources (the `floodgate-source` export condition), so no build is needed.
import { readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { spawnSync } from 'node:child_process'

function findTests(dir) {
  const out = []
  for (const name of readdirSync(dir)) {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) out.push(...findTests(path))
    else if (name.endsWith('.test.ts')) out.push(path)
  }
  return out
}

const only = process.argv.slice(2)
const roots = [...readdirSync('packages').map((name) => join('packages', name, 'test')), 'test']
const files = (only.length > 0 ? only : roots.flatMap(findTests)).sort()
const result = spawnSync(
  process.execPath,
  ['--conditions=floodgate-source', '--import', 'tsx', '--test', '--test-concurrency=2', '--test-timeout=600000', ...files],
  { stdio: 'inherit' },
)
process.exit(result.status ?? 1)
