// Runs a test's worker script in several processes at once: the concurrency tests that count what
// got through when processes hammer one key (Redis, memcached, lease and write-back).

import { spawn, type ChildProcess } from 'node:child_process'
import { createInterface } from 'node:readline'
import { scriptArgs } from './script.js'

/** What a worker process is waiting to hear next, and from whom the job's answer goes. */
interface Job {
  ready(): void
  report(line: string): void
  fail(error: Error): void
}

interface Worker {
  readonly child: ChildProcess
  job?: Job
}

/**
 * Worker processes of one test file (the worker's side: serveJobs in worker-jobs.ts). Each run sends
 * every worker its config; a worker prints `ready` once connected, starts when it reads `go`, and
 * prints its report as one JSON line. All start together, so their requests overlap as much as the
 * machine allows. A run reuses the processes an earlier run of the file left idle: each job makes
 * its own clients, store and limiter, and a process start costs more CPU than a round's work.
 */
export class Workers {
  readonly #script: string
  readonly #idle: Worker[] = []
  readonly #all: Worker[] = []

  /** `script`: the worker's TypeScript file, run with the repository's source condition (scriptArgs). */
  constructor(script: string) {
    this.#script = script
  }

  /** Gives `count` workers `config`, starts them together once all are connected, and collects their reports. */
  async run<Config, Report>(count: number, config: Config): Promise<Report[]> {
    const workers = Array.from({ length: count }, () => this.#idle.pop() ?? this.#start())
    const jobs = workers.map((worker) => this.#give<Report>(worker, config))
    await Promise.all(jobs.map((job) => job.ready))
    for (const worker of workers) worker.child.stdin!.write('go\n')
    const reports = await Promise.all(jobs.map((job) => job.report))
    this.#idle.push(...workers)
    return reports
  }

  /** Kills every worker process, idle or still running (a failed test must not leave them behind). */
  killAll(): void {
    for (const { child } of this.#all) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
    this.#idle.length = 0
  }

  #start(): Worker {
    const child = spawn(process.execPath, scriptArgs(this.#script), { stdio: ['pipe', 'pipe', 'pipe'] })
    const worker: Worker = { child }
    this.#all.push(worker)
    let stderr = ''
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (line === 'ready') worker.job?.ready()
      else if (line.startsWith('{')) worker.job?.report(line)
    })
    // A worker that dies mid-job fails the test instead of hanging it.
    child.once('close', (code, signal) => worker.job?.fail(new Error(`worker ${this.#script} exited with ${code ?? signal}: ${stderr}`)))
    return worker
  }

  #give<Report>(worker: Worker, config: unknown): { ready: Promise<void>; report: Promise<Report> } {
    const ready = deferred<void>()
    const report = deferred<Report>()
    // Whoever fails on `ready` never awaits `report`: its rejection must not go unhandled.
    report.promise.catch(() => undefined)
    worker.job = {
      ready: () => ready.resolve(),
      report: (line) => {
        worker.job = undefined
        report.resolve(JSON.parse(line) as Report)
      },
      fail: (error) => {
        worker.job = undefined
        ready.reject(error)
        report.reject(error)
      },
    }
    if (worker.child.exitCode !== null || worker.child.signalCode !== null) worker.job.fail(new Error(`worker ${this.#script} is gone`))
    else worker.child.stdin!.write(`${JSON.stringify(config)}\n`)
    return { ready: ready.promise, report: report.promise }
  }
}

/** A promise and its resolve and reject (Node 20 has no Promise.withResolvers). */
function deferred<T>(): { promise: Promise<T>; resolve(value: T): void; reject(error: Error): void } {
  let resolve!: (value: T) => void
  let reject!: (error: Error) => void
  const promise = new Promise<T>((yes, no) => {
    resolve = yes
    reject = no
  })
  return { promise, resolve, reject }
}
