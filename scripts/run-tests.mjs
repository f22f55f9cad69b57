// Runs every test file under packages/*/test/ and test/ (what spans the packages: the consumer test)
// with node's test runner, several files at a time, on the compiled copy of the tree that
// compile-tests.mjs makes in .test-build/ (why: see there). Paths given as arguments run alone.
// `--test` sorts its files, so the file list is built here and run in its order by
// run-test-files.mjs. The workspace packages resolve through the `floodgate-source` export
// condition, so no package build is needed.
//
// The files run once on each Node line the packages support (node-lines.mjs: Node's binaries from
// the npm registry, `nodeNN` in package.json), one line after the other (two lines at once would
// only share the cores); the run fails if any line does. FLOODGATE_TEST_NODES=24 (or `22,24`, or
// `current`: the Node running this) runs fewer.
//
//   node scripts/run-tests.mjs [--checks] [file ...]
//
// --checks (what `npm test` passes): `tsc --noEmit` and the lint run alongside the tests, their output
// printed as each ends, and `engines` is checked against every dependency and the lines tested
// (node-lines.mjs); the run fails if any check does.
// FLOODGATE_TEST_CONCURRENCY: files at a time (default 4). FLOODGATE_TEST_TIMES=FILE: each file's
// wall and CPU seconds go to FILE (scripts/test-times.cjs) and the longest are listed at the end.
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, relative, resolve } from 'node:path'
import { execFileSync, spawn } from 'node:child_process'
import { once } from 'node:events'
import { compileTests } from './compile-tests.mjs'
import { enginesProblems, nodeLines } from './node-lines.mjs'

// Most files wait on sockets, timers and child processes more than they compute (the regions tests
// on their 50 ms links, the Cluster tests on failovers): more files at a time than cores fills those
// waits.
const CONCURRENCY = Number(process.env.FLOODGATE_TEST_CONCURRENCY ?? 4)

// A bound on a hung file, not a speed test: at a load of 30 on two cores the consumer test (npm
// installs) and the conformance integration test each outlasted 10 minutes.
const FILE_TIMEOUT_MS = 30 * 60_000

// The files that take longest, started first (in this order): a long file started late runs on alone
// at the end while the cores idle. The rest follow in path order.
const LONGEST = [
  'test/consumer/consumer.test.ts',
  'test/reports/bench-report.test.ts',
  'test/docs/api-reference.test.ts',
  'packages/floodgate/test/regions/sync-modes.test.ts',
  'packages/floodgate/test/limiter/sync/lease-cluster.test.ts',
  'packages/floodgate/test/limiter/redis-failures.test.ts',
  'packages/floodgate-server/test/conformance/integration.test.ts',
  'packages/floodgate-server/test/cli/first-hour.test.ts',
  'packages/floodgate/test/limiter/sync/write-back-cluster.test.ts',
  'packages/floodgate/test/stores/redis/sentinel.test.ts',
  'packages/floodgate/test/regions/split.test.ts',
  'packages/floodgate-server/test/conformance/service.test.ts',
  'packages/floodgate/test/stores/redis/faults.test.ts',
  'packages/floodgate/test/regions/shared.test.ts',
  'test/reports/accuracy.test.ts',
  'packages/floodgate-server/test/cli/cli.test.ts',
]

function findTests(dir) {
  const out = []
  for (const name of readdirSync(dir)) {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) out.push(...findTests(path))
    else if (name.endsWith('.test.ts')) out.push(path)
  }
  return out
}

/** `files` with those of LONGEST first, in its order. */
function longestFirst(files) {
  const rank = (file) => (LONGEST.includes(file) ? LONGEST.indexOf(file) : LONGEST.length)
  return [...files].sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0))
}

/** Starts a check in the background; resolves to whether it passed, once its output is printed. */
function check(name, command, args) {
  const child = spawn(command, args, { cwd: repository, stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  child.stdout.on('data', (chunk) => (output += chunk))
  child.stderr.on('data', (chunk) => (output += chunk))
  return once(child, 'close').then(([code]) => {
    process.stderr.write(`# ${name}: ${code === 0 ? 'passed' : `FAILED (exit ${code})`}\n${code === 0 ? '' : output}`)
    return code === 0
  })
}

/** The longest files of the run, from the lines test-times.cjs wrote. */
function printTimes(path, count = 15) {
  const rows = readFileSync(path, 'utf8')
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line))
  const first = Math.min(...rows.map((row) => row.start))
  const wall = (row) => (row.end - row.start) / 1000
  const cpu = (row) => row.cpu + row.childCpu
  const total = rows.reduce((sum, row) => sum + cpu(row), 0)
  process.stderr.write(`# ${rows.length} files, ${total.toFixed(1)} s of CPU; the ${count} longest (wall s, CPU s, started at s):\n`)
  for (const row of rows.sort((a, b) => wall(b) - wall(a)).slice(0, count)) {
    const figures = [wall(row), cpu(row), (row.start - first) / 1000].map((figure) => figure.toFixed(1).padStart(6))
    process.stderr.write(`#   ${figures.join(' ')}  ${row.file}\n`)
  }
}

const repository = resolve(import.meta.dirname, '..')
const args = process.argv.slice(2)
const withChecks = args.includes('--checks')
const only = args.filter((arg) => arg !== '--checks').map((path) => relative(repository, resolve(path)))
const roots = [...readdirSync(join(repository, 'packages')).map((name) => join('packages', name, 'test')), 'test']
const files = longestFirst(
  only.length > 0 ? only : roots.flatMap((root) => findTests(join(repository, root)).map((path) => relative(repository, path))),
)
// tsc is the longest step outside the tests, so it runs alongside them. Its heap grows large, and a
// larger young generation spares it some of its many scavenges.
const tsc = ['--max-semi-space-size=64', join(repository, 'node_modules/typescript/bin/tsc'), '--noEmit']
const lines = nodeLines(repository)
// Started first: its synchronous start writes the algorithms' generated files (gen-algorithms.mjs),
// which tsc and the lint read.
const building = compileTests(repository)
const checks = withChecks ? [check('tsc --noEmit', process.execPath, tsc), check('npm run lint', 'npm', ['run', '--silent', 'lint'])] : []
if (withChecks) {
  const problems = enginesProblems(repository)
  process.stderr.write(`# engines: ${problems.length === 0 ? 'passed' : `FAILED\n${problems.map((p) => `#   ${p}\n`).join('')}`}\n`)
  checks.push(Promise.resolve(problems.length === 0))
}
const build = await building
const times = process.env.FLOODGATE_TEST_TIMES ? resolve(process.env.FLOODGATE_TEST_TIMES) : undefined

/** Runs the files on one line's node binary; resolves to whether every test passed, and what failed. */
async function runOn(line) {
  if (times) rmSync(times, { force: true })
  const failures = join(mkdtempSync(join(tmpdir(), 'floodgate-failures-')), 'failures.jsonl')
  const runner = spawn(
    line.bin,
    [
      '--conditions=floodgate-source',
      '--enable-source-maps',
      join(repository, 'scripts/run-test-files.mjs'),
      String(CONCURRENCY),
      String(FILE_TIMEOUT_MS),
      ...files.map((file) => file.replace(/\.ts$/, '.js')),
    ],
    {
      stdio: 'inherit',
      cwd: build,
      env: {
        ...process.env,
        // Tests that need the checkout itself, not its compiled copy (the consumer test packs it), find it here.
        FLOODGATE_REPOSITORY: repository,
        FLOODGATE_TEST_FAILURES: failures,
        ...(times && {
          FLOODGATE_TEST_TIMES: times,
          NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --require=${join(repository, 'scripts/test-times.cjs')}`,
        }),
      },
    },
  )
  const [status] = await once(runner, 'close')
  if (times) printTimes(times)
  const failed = existsSync(failures)
    ? readFileSync(failures, 'utf8')
        .trim()
        .split('\n')
        .map((row) => JSON.parse(row))
    : []
  rmSync(join(failures, '..'), { recursive: true, force: true })
  return { passed: status === 0, failed }
}

const results = []
for (const line of lines) {
  const version = execFileSync(line.bin, ['--version'], { encoding: 'utf8' }).trim()
  process.stderr.write(`# Node ${line.name}: ${version} (${line.bin})\n`)
  results.push({ version, ...(await runOn(line)) })
}
const checked = await Promise.all(checks)
// Every line's failures again, last: a reader of the tail of the output (CI shows only that) sees them.
for (const { version, failed } of results) {
  for (const failure of failed) {
    const error = failure.error
      .split('\n')
      .slice(0, 12)
      .map((row) => `#     ${row}`)
      .join('\n')
    process.stderr.write(`# FAILED on Node ${version}: ${relative(repository, failure.file ?? '?')} > ${failure.test}\n${error}\n`)
  }
}
for (const { version, passed } of results) process.stderr.write(`# tests on Node ${version}: ${passed ? 'passed' : 'FAILED'}\n`)
process.exit(results.every((result) => result.passed) && checked.every(Boolean) ? 0 : 1)
