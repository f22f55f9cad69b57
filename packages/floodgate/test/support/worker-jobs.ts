// The worker's side of Workers (workers.ts), for a worker script's main.

import { createInterface } from 'node:readline'

/**
 * Serves jobs until stdin ends. A job is a line with its JSON config: `prepare` makes the job's own
 * clients and store and connects them, and returns the run. The worker then prints `ready`, runs
 * when a line `go` comes (so every process starts together), and prints the run's report as one JSON
 * line. A failure is printed to stderr and exits 1.
 */
export function serveJobs<Config, Report>(name: string, prepare: (config: Config) => Promise<() => Promise<Report>>): void {
  const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]()
  async function serve(): Promise<void> {
    for (;;) {
      const job = await lines.next()
      if (job.done) return
      const run = await prepare(JSON.parse(job.value) as Config)
      process.stdout.write('ready\n')
      const go = await lines.next()
      if (go.done || go.value.trim() !== 'go') throw new Error(`expected go, got ${go.done ? 'the end of stdin' : go.value}`)
      process.stdout.write(`${JSON.stringify(await run())}\n`)
    }
  }
  serve().catch((error: unknown) => {
    process.stderr.write(`${name} failed: ${error instanceof Error ? error.stack : String(error)}\n`)
    process.exit(1)
  })
}
