// docs/api/ is generated from the library's sources (`npm run docs:api`: TypeDoc, Markdown) and
// committed, so that its pages are read where the guides link them, in the repository and in the
// package. This regenerates it and demands the committed copy be the same: a changed doc comment
// or export without `npm run docs:api` fails here.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, relative } from 'node:path'
import { promisify } from 'node:util'

const run = promisify(execFile)
/** The checkout (not the test runner's compiled copy of it). */
const ROOT = process.env.FLOODGATE_REPOSITORY ?? join(import.meta.dirname, '../..')

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    return statSync(path).isDirectory() ? files(path) : [path]
  })
}

describe('docs/api', { timeout: 180_000 }, () => {
  it('is what npm run docs:api makes of the sources today', async () => {
    const out = mkdtempSync(join(tmpdir(), 'floodgate-api-'))
    try {
      const typedoc = join(ROOT, 'node_modules/.bin/typedoc')
      await run(typedoc, ['--options', 'packages/floodgate/typedoc.json', '--out', out, '--logLevel', 'Warn'], { cwd: ROOT })
      const committed = join(ROOT, 'docs/api')
      const made = files(out).map((file) => relative(out, file))
      assert.deepEqual(
        files(committed)
          .map((file) => relative(committed, file))
          .sort(),
        made.sort(),
        'run npm run docs:api',
      )
      const stale = made.filter((file) => readFileSync(join(out, file), 'utf8') !== readFileSync(join(committed, file), 'utf8'))
      assert.deepEqual(stale, [], `docs/api is stale: run npm run docs:api and commit it (${stale.join(', ')})`)
    } finally {
      rmSync(out, { recursive: true, force: true })
    }
  })
})
