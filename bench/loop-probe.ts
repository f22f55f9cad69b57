// A probe for bench/floods.ts: where a process's event loop stalls. Loaded into a process (the service with
// `--import ./bench/loop-probe.ts` and BENCH_PROBE_FILE set; the bench's own processes call startProbe),
// it ticks every 2 ms and appends one JSON line per stall longer than BENCH_PROBE_STALL_MS (default 15):
// when it began (epoch ms, comparable across processes), how long the loop was blocked, the GC pause
// time and the connections accepted within it. Not a test: numbers only.

import { appendFileSync } from 'node:fs'
import { Server } from 'node:net'
import { constants, PerformanceObserver, performance } from 'node:perf_hooks'

export interface Stall {
  /** performance.timeOrigin + performance.now() when the loop was last seen running. */
  at: number
  /** Milliseconds the loop did not run the probe's timer. */
  ms: number
  /** GC pause milliseconds that ended within the stall. */
  gcMs: number
  /** Of which mark-compact (major) GC. */
  majorGcMs: number
  /** Connections any net.Server of the process accepted within it. */
  accepted: number
  /** CPU milliseconds the process used within it (all threads): near `ms`, the loop worked; far below, the OS ran something else. */
  cpuMs: number
}

const TICK_MS = 2
/** The CPU reading is renewed every this many ticks, not each: process.cpuUsage() costs tens of µs. */
const CPU_EVERY = 10

/** Starts recording; each stall goes to `onStall`. Returns a stop function. */
export function startProbe(onStall: (stall: Stall) => void, thresholdMs = 15): () => void {
  let accepted = 0
  let gcMs = 0
  let majorGcMs = 0
  const emit = Server.prototype.emit as (this: Server, event: string | symbol, ...args: unknown[]) => boolean
  Server.prototype.emit = function (this: Server, event: string | symbol, ...args: unknown[]) {
    if (event === 'connection') accepted++
    return emit.call(this, event, ...args)
  } as typeof Server.prototype.emit
  const gc = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      gcMs += entry.duration
      if ((entry as { detail?: { kind?: number } }).detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) majorGcMs += entry.duration
    }
  })
  gc.observe({ entryTypes: ['gc'] })
  let last = performance.now()
  let cpu = process.cpuUsage()
  let ticks = 0
  const timer = setInterval(() => {
    const now = performance.now()
    const late = now - last - TICK_MS
    if (late > thresholdMs) {
      // Over the stall and the up to CPU_EVERY ticks before it.
      const used = process.cpuUsage(cpu)
      onStall({ at: performance.timeOrigin + last, ms: late, gcMs, majorGcMs, accepted, cpuMs: (used.user + used.system) / 1000 })
      ticks = CPU_EVERY
    }
    if (++ticks >= CPU_EVERY) {
      cpu = process.cpuUsage()
      ticks = 0
    }
    last = now
    accepted = 0
    gcMs = 0
    majorGcMs = 0
  }, TICK_MS)
  timer.unref()
  return () => {
    clearInterval(timer)
    gc.disconnect()
    Server.prototype.emit = emit as typeof Server.prototype.emit
  }
}

const file = process.env.BENCH_PROBE_FILE
if (file !== undefined) {
  const threshold = Number(process.env.BENCH_PROBE_STALL_MS ?? 15)
  startProbe((stall) => appendFileSync(file, `${JSON.stringify(stall)}\n`), threshold)
}

/** One legitimate call: when it started (epoch ms, as Stall.at) and how long it took. */
export interface Call {
  at: number
  ms: number
  /** Of which the new connection took this long to be ready (new-connection calls, probed). */
  connectMs?: number
}

/**
 * Lines saying where the slow calls' time went: for each call over `slowMs`, the longest stall of the
 * service and of the client that overlapped it; and each process's stalls in all (count, longest, GC, accepts).
 */
export function explainSlowCalls(calls: readonly Call[], service: readonly Stall[], client: readonly Stall[], slowMs = 50): string[] {
  const overlapping = (call: Call, stalls: readonly Stall[]) =>
    stalls
      .filter((stall) => stall.at < call.at + call.ms && stall.at + stall.ms > call.at)
      .reduce((max, stall) => Math.max(max, stall.ms), 0)
  const summary = (name: string, stalls: readonly Stall[]) => {
    const longest = stalls.reduce((max, stall) => Math.max(max, stall.ms), 0)
    const gc = stalls.reduce((sum, stall) => sum + stall.gcMs, 0)
    const major = stalls.reduce((sum, stall) => sum + stall.majorGcMs, 0)
    const accepts = stalls.reduce((max, stall) => Math.max(max, stall.accepted), 0)
    const total = stalls.reduce((sum, stall) => sum + stall.ms, 0)
    const cpu = stalls.reduce((sum, stall) => sum + stall.cpuMs, 0)
    return (
      `${name}: ${stalls.length} stalls, ${total.toFixed(0)} ms in all ` +
      `(CPU ${cpu.toFixed(0)} ms, GC ${gc.toFixed(0)} ms, major ${major.toFixed(0)}), ` +
      `longest ${longest.toFixed(1)} ms, most accepts in one ${accepts}`
    )
  }
  const slow = calls.filter((call) => call.ms > slowMs).sort((a, b) => b.ms - a.ms)
  const lines = [summary('service loop', service), summary('client loop', client), `calls over ${slowMs} ms: ${slow.length}`]
  const worst = [...service].sort((a, b) => b.ms - a.ms).slice(0, 6)
  const described = worst.map(
    (s) => `${s.ms.toFixed(0)} ms (CPU ${s.cpuMs.toFixed(0)}, GC ${s.gcMs.toFixed(0)}/${s.majorGcMs.toFixed(0)}, ${s.accepted} accepts)`,
  )
  lines.push(`service's longest stalls: ${described.join(', ')}`)
  for (const call of slow.slice(0, 12)) {
    const stalled = `service stalled ${overlapping(call, service).toFixed(1)} ms, client stalled ${overlapping(call, client).toFixed(1)} ms`
    const connect = call.connectMs === undefined ? '' : ` (connect ${call.connectMs.toFixed(1)} ms)`
    lines.push(`  ${call.ms.toFixed(1)} ms${connect}: ${stalled}`)
  }
  return lines
}

/** The listening socket's accept queue at a moment: connections the kernel completed that the process has not accepted. */
export interface QueueSample {
  at: number
  queued: number
}

/**
 * Samples the accept queue of the TCP listener on `port` (ss's Recv-Q of a listening socket) one after
 * another (each ss takes ~20 ms) until `stopped()`; resolves with the samples.
 */
export async function sampleAcceptQueue(port: number, stopped: () => boolean): Promise<QueueSample[]> {
  const { execFile } = await import('node:child_process')
  const samples: QueueSample[] = []
  while (!stopped()) {
    const at = performance.timeOrigin + performance.now()
    const out = await new Promise<string>((resolve) =>
      execFile('ss', ['-Hltn', `sport = :${port}`], (_error, stdout) => resolve(stdout ?? '')),
    )
    const queued = Number(out.trim().split(/\s+/)[1])
    if (Number.isFinite(queued)) samples.push({ at, queued })
  }
  return samples
}

/** Lines on the accept queue: its deepest, and its depth when each of the slowest connects began. */
export function explainAcceptQueue(calls: readonly Call[], samples: readonly QueueSample[], slowMs = 100): string[] {
  if (samples.length === 0) return ['accept queue: no samples (is ss installed?)']
  const deepest = samples.reduce((max, sample) => Math.max(max, sample.queued), 0)
  const around = (at: number) => samples.filter((sample) => sample.at >= at - 50 && sample.at <= at + 50).map((s) => s.queued)
  const slow = calls.filter((call) => (call.connectMs ?? 0) > slowMs).sort((a, b) => (b.connectMs ?? 0) - (a.connectMs ?? 0))
  const lines = [`accept queue: ${samples.length} samples, deepest ${deepest}; connects over ${slowMs} ms: ${slow.length}`]
  for (const call of slow.slice(0, 8))
    lines.push(`  connect ${(call.connectMs ?? 0).toFixed(1)} ms: queue at its start ${around(call.at).join('/') || '-'}`)
  return lines
}
