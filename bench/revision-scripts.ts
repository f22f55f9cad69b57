// The Redis scripts of this tree and of another revision, for the benches that set one against the
// other (redis-lua-ab.ts, redis-lua-steps.ts). The algorithms' Lua twins are build output
// (scripts/gen-algorithms.mjs, gitignored), so a revision's scripts are what its own generator makes
// of its own definitions: its sources are extracted to a temporary folder (git archive) and its
// generator run there on this checkout's node_modules. A revision from before the twins were
// generated has no generator, and its committed files are read as they are.

import { execFileSync } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const SCRIPTS = 'packages/floodgate/src/stores/redis/scripts'
const GENERATOR = 'scripts/gen-algorithms.mjs'

/** Brings this tree's generated twins up to date with its definitions (they may have been edited since the last build). */
export function generateThisTree(): void {
  execFileSync(process.execPath, [join(ROOT, GENERATOR)], { cwd: ROOT, stdio: 'ignore' })
}

/** `rev`'s scripts/<name>.lua by name; undefined for a part the revision does not have. */
export function revisionScripts(rev: string): (name: string) => string | undefined {
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-revision-'))
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }))
  const archive = execFileSync('git', ['archive', rev, '--', 'scripts', 'packages/floodgate/src'], { cwd: ROOT, maxBuffer: 1 << 30 })
  execFileSync('tar', ['-x', '-C', dir], { input: archive })
  if (existsSync(join(dir, GENERATOR))) {
    symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'))
    execFileSync(process.execPath, [join(dir, GENERATOR)], { cwd: dir, stdio: 'ignore' })
  }
  return (name) => {
    const path = join(dir, SCRIPTS, `${name}.lua`)
    return existsSync(path) ? readFileSync(path, 'utf8') : undefined
  }
}
