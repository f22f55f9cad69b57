// Runs the test files it is given, in the order given, with node:test's run(): `node --test` sorts its
// files by path, and scripts/run-tests.mjs starts the longest first. Each file runs in a process of its
// own with this process's node flags. Exits 1 if any test failed.
//
//   node [flags] scripts/run-test-files.mjs CONCURRENCY TIMEOUT_MS FILE ...
import { run } from 'node:test'
import { spec, tap } from 'node:test/reporters'

const [concurrency, timeout, ...files] = process.argv.slice(2)
let failed = false
const stream = run({ files, concurrency: Number(concurrency), timeout: Number(timeout) })
stream.on('test:fail', (data) => {
  if (data.todo === undefined) failed = true
})
// As `node --test` reports: for a person at a terminal, or as TAP for a program.
const reporter = process.stdout.isTTY ? new spec() : tap
stream.compose(reporter).pipe(process.stdout)
process.on('exit', () => {
  if (failed) process.exitCode = 1
})
