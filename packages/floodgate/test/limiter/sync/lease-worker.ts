// Child process for lease-cluster.test.ts: its own Cluster client, RedisStore and lease engine
// hammer one hot key as its sibling processes do, and it reports what it admitted.
//
// Protocol: argv[2] is a JSON LeaseWorkerConfig. The worker connects, prints `ready`, waits for a
// line `go` on stdin (so every process starts together), runs, gives its leases back, prints one
// JSON line `{"admitted": n, "lease": n, "store": n}` and exits.

import { createInterface } from 'node:readline'
import { Cluster } from 'ioredis'
import { createPolicies, type PolicyOptions } from '../../../src/core/policy.js'
import { RedisStore } from '../../../src/redis.js'
import { LeaseSync } from '../../../src/limiter/sync/lease-sync.js'

export interface LeaseWorkerConfig {
  startupNodes: { host: string; port: number }[]
  key: string
  policies: PolicyOptions[]
  /** Decisions this worker asks for in all. */
  requests: number
  /** Decisions in flight at once. */
  inflight: number
}

export interface LeaseWorkerReport {
  admitted: number
  /** Decisions answered in-process, and by a store call. */
  lease: number
  store: number
}

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2] ?? '') as LeaseWorkerConfig
  const policies = createPolicies(config.policies)
  const client = new Cluster(config.startupNodes, { scaleReads: 'master' })
  const store = new RedisStore({ client })
  const leases = new LeaseSync({ store })
  await client.ping()
  process.stdout.write('ready\n')
  await lineFromStdin('go')

  const report: LeaseWorkerReport = { admitted: 0, lease: 0, store: 0 }
  let next = 0
  async function lane(): Promise<void> {
    while (next++ < config.requests) {
      await new Promise<void>((resolve, reject) => {
        leases.decide(config.key, policies, 1, (error, response, source) => {
          if (error !== null) return reject(error)
          if (response!.allowed) report.admitted++
          report[source!]++
          resolve()
        })
      })
    }
  }
  await Promise.all(Array.from({ length: config.inflight }, lane))
  await leases.close()
  await store.close()
  await client.quit()
  process.stdout.write(`${JSON.stringify(report)}\n`)
}

function lineFromStdin(expected: string): Promise<void> {
  return new Promise((resolve) => {
    const lines = createInterface({ input: process.stdin })
    lines.on('line', (line) => {
      if (line.trim() === expected) {
        lines.close()
        // Nothing more comes on stdin; an open stdin would keep this process alive.
        process.stdin.destroy()
        resolve()
      }
    })
  })
}

main().catch((error: unknown) => {
  process.stderr.write(`lease-worker failed: ${error instanceof Error ? error.stack : String(error)}\n`)
  process.exit(1)
})
