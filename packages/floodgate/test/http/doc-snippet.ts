// For tests that keep a snippet of docs/middleware.md verbatim (between `// snippet: name` and
// `// end snippet`) so that tsc type-checks it and the test runs it: both texts, to compare.

import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'

const docs = readFileSync(new URL('../../../../docs/middleware.md', import.meta.url), 'utf8')

/** The code block that follows `<!-- snippet: name … -->` in docs/middleware.md. */
export function documented(name: string): string {
  const match = new RegExp(`<!-- snippet: ${name}\\b[^>]*-->\\n\`\`\`ts\\n([\\s\\S]*?)\`\`\``).exec(docs)
  assert.ok(match, `docs/middleware.md has no snippet ${name}`)
  return match[1].trim()
}

/**
 * The lines between `// snippet: name` and `// end snippet` of a test file, read by its name in
 * this folder: the test runner runs a compiled copy, without its comments.
 */
export function kept(name: string, file: string): string {
  const here = readFileSync(new URL(`./${file}`, import.meta.url), 'utf8')
  const match = new RegExp(`\\n// snippet: ${name}\\n([\\s\\S]*?)\\n// end snippet`).exec(here)
  assert.ok(match, `no snippet ${name} in ${file}`)
  return match[1].trim()
}
