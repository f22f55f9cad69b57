// `npm run bench:report -- --quick`, as CI runs it: the memory, Redis and service benches run at
// reduced sizes, and the report comes out with valid SVG charts naming every contender.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFile, spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { scriptArgs } from '../../packages/floodgate/test/support/script.js'

const run = promisify(execFile)
const SCRIPT = join(import.meta.dirname, '../../bench/report.ts')
const CHARTS = [
  'latency.svg',
  'memory-per-key.svg',
  'memory-throughput.svg',
  'redis-memory-per-key.svg',
  'redis-throughput.svg',
  'service-throughput.svg',
]

/** Text of an SVG's <text> elements (echarts writes labels as text, XML-escaped). */
function textOf(svg: string): string {
  const unescape = (text: string) => text.replaceAll('&amp;', '&').replaceAll('&lt;', '<').replaceAll('&gt;', '>')
  return [...svg.matchAll(/<text[^>]*>([^<]*)<\/text>/g)].map((m) => unescape(m[1])).join('\n')
}

test('npm run bench:report -- --quick writes docs/benchmarks.md and its SVG charts', { timeout: 900_000 }, async () => {
  const out = mkdtempSync(join(tmpdir(), 'floodgate-bench-report-'))
  try {
    // Benchmarks share the machine's lock (CONTRIBUTING): wait for another one to finish rather than disturb it.
    // A timing run of the whole suite holds that lock itself and says so; waiting for it would deadlock.
    const flock = process.env.FLOODGATE_BENCH_LOCK_HELD !== '1' && spawnSync('flock', ['--version']).status === 0
    const command = [process.execPath, ...scriptArgs(SCRIPT), '--quick', '--out', out]
    const [file, ...args] = flock ? ['flock', '-w', '600', '/tmp/floodgate-bench.lock', ...command] : command
    await run(file, args, { maxBuffer: 64 << 20 })
    const report = readFileSync(join(out, 'benchmarks.md'), 'utf8')
    assert.deepEqual(readdirSync(join(out, 'benchmarks')).sort(), CHARTS)
    for (const chart of CHARTS) {
      const svg = readFileSync(join(out, 'benchmarks', chart), 'utf8')
      assert.match(svg, /^<svg[^>]*xmlns="http:\/\/www.w3.org\/2000\/svg"[^>]*>[\s\S]*<\/svg>\s*$/, chart)
      assert.ok(report.includes(`(benchmarks/${chart})`), `the report shows ${chart}`)
    }
    // Every contender of each table is drawn in its chart.
    const throughput = textOf(readFileSync(join(out, 'benchmarks', 'redis-throughput.svg'), 'utf8'))
    for (const name of ['floodgate gcra', 'rate-limiter-flexible', 'rate-limit-redis (express-rate-limit)', 'raw INCR (autopipelined)']) {
      assert.ok(throughput.includes(name), name)
    }
    const latency = textOf(readFileSync(join(out, 'benchmarks', 'latency.svg'), 'utf8'))
    for (const name of ['bare Fastify route (same-sized JSON)', 'POST /v1/check, embedded store', 'POST /v1/check, Redis']) {
      assert.ok(latency.includes(name), name)
    }
    // The machine and the version of every contender are stated.
    const stated = [
      /\| redis-server \| \d+\.\d+/,
      /\| rate-limiter-flexible \| \d+\.\d+/,
      /\| rate-limit-redis \| \d+\.\d+/,
      /\| Node\.js \| v\d+/,
      /^- \d+ × .+ RAM/m,
    ]
    for (const line of stated) {
      assert.match(report, line)
    }
    assert.match(report, /Reduced sizes/)
  } finally {
    rmSync(out, { recursive: true, force: true })
  }
})
