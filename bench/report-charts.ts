// The figures the benchmark report charts, the charts made of them, and the same figures read back
// from a written docs/benchmarks.md (its tables state every charted figure), so that the charts can
// be redrawn without running the benchmarks again (bench/redraw-charts.ts).

import { barChart, keyCounts, latencyChart } from './charts.js'

export interface Throughput {
  name: string
  median: number
  samples: number[]
}
export interface MemoryResults {
  node: string
  ops: number
  rounds: number
  keys: number
  /** The key counts the heap figures were taken at (bench:memory's --heap-keys list). */
  heapKeys: number[]
  throughput: Throughput[]
  heapBytesPerKey: { name: string; bytes: number }[]
}
export interface RedisResults {
  redisVersion: string
  callers: number
  keys: number
  rounds: number
  roundMs: number
  throughput: (Throughput & { failed: number })[]
}
export interface RedisMemoryResults {
  memoryUsagePerKey: { algorithm: string; state: string; bytes: number }[]
  /** used_memory delta per key, per key count and layout (Floodgate's records and reference layouts). */
  usedMemoryPerKey: { keys: number; layout: string; bytesPerKey: number }[]
}
export interface ServiceResults {
  rounds: number
  seconds: number
  connections: number
  grpcCallers: number
  throughput: (Throughput & { cpuMicrosPerRequest: number })[]
  latencyMs: { name: string; percentiles: Record<string, number> }[]
}

/** What the charts need of each bench's results. */
export interface ChartedFigures {
  memory: Pick<MemoryResults, 'heapKeys' | 'throughput' | 'heapBytesPerKey'>
  redis: Pick<RedisResults, 'callers' | 'throughput'>
  redisMemory: Pick<RedisMemoryResults, 'memoryUsagePerKey'>
  service: Pick<ServiceResults, 'throughput' | 'latencyMs'>
}

/** Every chart of the report, by file name. */
export function reportCharts({ memory, redis, redisMemory, service }: ChartedFigures): Record<string, string> {
  const medians = (rows: readonly { name: string; median: number }[]) => rows.map((r) => ({ name: r.name, value: r.median }))
  return {
    'memory-throughput.svg': barChart('Embedded store: decisions/s (median of rounds)', 'decisions/s', medians(memory.throughput)),
    'redis-throughput.svg': barChart(`Redis: decisions/s, ${redis.callers} callers (median)`, 'decisions/s', medians(redis.throughput)),
    'service-throughput.svg': barChart('Service: requests/s (median)', 'requests/s', medians(service.throughput)),
    'latency.svg': latencyChart(service.latencyMs),
    'memory-per-key.svg': barChart(
      `Embedded store: heap bytes per key (at ${keyCounts(memory.heapKeys)}, one policy)`,
      'bytes',
      memory.heapBytesPerKey.map((r) => ({ name: r.name, value: r.bytes })),
    ),
    'redis-memory-per-key.svg': barChart(
      'Redis: MEMORY USAGE of one key (limit 100 per 1h)',
      'bytes',
      // Every row is one of Floodgate's algorithms' records.
      redisMemory.memoryUsagePerKey.map((r) => ({
        name: `${r.algorithm}${r.state === '1 request' ? '' : ` (${r.state})`}`,
        value: r.bytes,
        group: 'ours' as const,
      })),
    ),
  }
}

interface Table {
  headers: string[]
  rows: string[][]
}

/** The markdown tables of a document, in order. */
function tablesOf(markdown: string): Table[] {
  const tables: Table[] = []
  let current: Table | undefined
  for (const line of markdown.split('\n')) {
    if (!line.startsWith('|')) {
      current = undefined
      continue
    }
    const cells = line
      .slice(1, line.endsWith('|') ? -1 : undefined)
      .split('|')
      .map((cell) => cell.trim())
    if (current === undefined) tables.push((current = { headers: cells, rows: [] }))
    else if (!cells.every((cell) => /^-+$/.test(cell))) current.rows.push(cells)
  }
  return tables
}

function tableWith(tables: Table[], headers: string[]): Table {
  const found = tables.find((table) => headers.every((header, i) => table.headers[i] === header))
  if (found === undefined) throw new Error(`docs/benchmarks.md: no table headed ${headers.join(' | ')}`)
  return found
}

/** "2,979,185" → 2979185; "106 B" → 106; "1.5 KiB" → 1536. */
function figure(text: string): number {
  const match = /^([\d,.]+)\s*(B|KiB|MiB)?$/.exec(text.trim())
  if (match === null) throw new Error(`docs/benchmarks.md: ${JSON.stringify(text)} is not a figure`)
  const scale = match[2] === 'KiB' ? 1024 : match[2] === 'MiB' ? 1024 * 1024 : 1
  return Number(match[1].replaceAll(',', '')) * scale
}

/** The charted figures, as a report written by bench:report states them. */
export function figuresOfReport(markdown: string): ChartedFigures {
  const tables = tablesOf(markdown)
  const throughput = (table: Table) => table.rows.map((row) => ({ name: row[0], median: figure(row[1]), samples: [] }))
  const heap = tableWith(tables, ['store', 'heap per key']).rows.map((row) => ({ name: row[0], bytes: figure(row[1]) }))
  const heapKeys = [...new Set(heap.map((row) => Number(/ at (\d+) keys$/.exec(row.name)?.[1])))]
  const callers = Number(/`bench:redis`: (\d+) concurrent callers/.exec(markdown)?.[1])
  const latency = tableWith(tables, ['contender', 'p0.001'])
  return {
    memory: {
      heapKeys,
      throughput: throughput(tableWith(tables, ['contender', 'decisions/s', 'vs rate-limiter-flexible', 'vs floor'])),
      heapBytesPerKey: heap,
    },
    redis: {
      callers,
      throughput: throughput(tableWith(tables, ['contender', 'decisions/s', 'vs rate-limiter-flexible', 'failed'])).map((r) => ({
        ...r,
        failed: 0,
      })),
    },
    redisMemory: {
      memoryUsagePerKey: tableWith(tables, ['algorithm', 'state', 'MEMORY USAGE']).rows.map((row) => ({
        algorithm: row[0],
        state: row[1],
        bytes: figure(row[2]),
      })),
    },
    service: {
      throughput: throughput(tableWith(tables, ['contender', 'requests/s'])).map((r) => ({ ...r, cpuMicrosPerRequest: 0 })),
      latencyMs: latency.rows.map((row) => ({
        name: row[0],
        percentiles: Object.fromEntries(latency.headers.slice(1).map((header, i) => [header.replace('.', '_'), Number(row[i + 1])])),
      })),
    },
  }
}
