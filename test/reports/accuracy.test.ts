// `npm run accuracy` on short traces, as CI runs it: the report and its charts come out, the exact
// algorithm is exact, the figures the report discusses are there, and write-back and shared regions
// stay within their documented bounds (the regions' run starts its own redis-servers on free ports).

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { scriptArgs } from '../../packages/floodgate/test/support/script.js'

const run = promisify(execFile)
const SCRIPT = join(import.meta.dirname, '../../bench/accuracy.ts')

test('npm run accuracy -- --quick writes the report and its SVG charts', { timeout: 120_000 }, async () => {
  const out = mkdtempSync(join(tmpdir(), 'floodgate-accuracy-'))
  try {
    await run(process.execPath, [...scriptArgs(SCRIPT), '--quick', '--out', out])
    const report = readFileSync(join(out, 'accuracy.md'), 'utf8')
    const charts = readdirSync(join(out, 'accuracy'))
    assert.deepEqual(charts.sort(), [
      'admitted-vs-exact.svg',
      'bounds.svg',
      'bursty-window.svg',
      'sliding-window-bursty.svg',
      'worst-window.svg',
      'wrong-decisions.svg',
    ])
    for (const chart of charts) {
      assert.match(readFileSync(join(out, 'accuracy', chart), 'utf8'), /^<svg[^>]*>[\s\S]*<\/svg>\s*$/)
      assert.ok(report.includes(`(accuracy/${chart})`), `the report shows ${chart}`)
    }
    // The sliding log is the exact rolling window: it never disagrees with it.
    for (const row of report.split('\n').filter((line) => line.includes('| sliding-log |'))) {
      assert.match(row, /\| \+0\.00% \| 1\.00x \| 0\.000% \| 0\.000% \|$/, row)
    }
    // The sliding-window counter on many bursty traces: overall error and worst window, with their spread.
    assert.match(report, /\| admitted overall vs exact \| -?\d+\.\d+% \| -?\d+\.\d+–-?\d+\.\d+% \|/)
    assert.match(report, /\| worst rolling window, over the limit \| \+\d+% \| \d+–\d+% \|/)
    // Cloudflare's figure is cited with its source, and where the bound checks live.
    assert.match(report, /0\.003%[\s\S]*blog\.cloudflare\.com\/counting-things-a-lot-of-different-things/)
    assert.match(report, /BOUND_CHECKS/)
    // Write-back and shared regions, measured against their documented bounds: every setup within.
    const boundRows = report.split('\n').filter((line) => /^\| (N|R) \d/.test(line))
    assert.ok(boundRows.filter((row) => row.startsWith('| N ')).length >= 2, 'write-back setups')
    assert.ok(boundRows.filter((row) => row.startsWith('| R ')).length >= 2, 'regions setups')
    // Write-back's under-admission: one after another, the shortfall within the formula's.
    const underRows = report.split('\n').filter((line) => line.startsWith('| in turn, N '))
    assert.ok(underRows.length >= 3, 'write-back under-admission setups')
    for (const row of underRows) {
      const [limit, admitted, short, bound] = row.split('|').slice(2, 6).map(Number)
      assert.equal(short, limit - admitted, row)
      assert.ok(short <= bound, `short of the limit by more than the formula allows: ${row}`)
    }
    for (const row of boundRows) {
      const [limit, admitted, over, bound] = row.split('|').slice(2, 6).map(Number)
      assert.equal(over, admitted - limit, row)
      assert.ok(over <= bound, `over its documented bound: ${row}`)
    }
    assert.ok(
      boundRows.some((row) => Number(row.split('|')[4]) > 0),
      'some setup over-admits: the runs exercise the bound',
    )
    // Fixed window lets a client that knows the boundary have twice the limit around it.
    assert.match(report, /\| window edge \| fixed-window \| \d+ \| \d+ \| [^|]+ \| 2\.00x \|/)
  } finally {
    rmSync(out, { recursive: true, force: true })
  }
})
