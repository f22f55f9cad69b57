// Runs the test files it is given, in the order given, with node:test's run(): `node --test` sorts its
// files by path, and scripts/run-tests.mjs starts the longest first. Each file runs in a process of its
// own with this process's node flags. Exits 1 if any test failed.
//
//   node [flags] scripts/run-test-files.mjs CONCURRENCY TIMEOUT_MS FILE ...
//
// FLOODGATE_TEST_FAILURES=FILE: each failed test is also appended to FILE as a JSON line (file, test
// and error), so run-tests.mjs can list every line's failures after the last line's report. CI shows
// only the tail of a run's output, and the first Node line's failures would scroll out of it.
import { appendFileSync } from 'node:fs'
import { run } from 'node:test'
import { spec, tap } from 'node:test/reporters'
import { inspect } from 'node:util'

const [concurrency, timeout, ...files] = process.argv.slice(2)
const failures = process.env.FLOODGATE_TEST_FAILURES
let failed = false
const stream = run({ files, concurrency: Number(concurrency), timeout: Number(timeout) })
stream.on('test:fail', (data) => {
  if (data.todo !== undefined) return
  failed = true
  if (!failures) return
  // A suite fails with its failing test; the test's own line carries the cause.
  const error = data.details?.error
  if (data.details?.type === 'suite' || error?.failureType === 'subtestsFailed') return
  const cause = error?.cause ?? error
  const message = (cause instanceof Error ? (cause.stack ?? cause.message) : inspect(cause, { depth: 3 })) ?? String(error)
  appendFileSync(failures, `${JSON.stringify({ file: data.file, test: data.name, error: message.slice(0, 4000) })}\n`)
})
// As `node --test` reports: for a person at a terminal, or as TAP for a program.
const reporter = process.stdout.isTTY ? new spec() : tap
stream.compose(reporter).pipe(process.stdout)
process.on('exit', () => {
  if (failed) process.exitCode = 1
})
