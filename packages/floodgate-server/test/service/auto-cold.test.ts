// The service's `sync: auto` rules on Redis: a cold token-bucket or gcra key is decided by exact's
// script (one call, no lease ledger read), as the library's RedisStore allows, not by the lease script.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { Redis } from 'ioredis'
import { startRedis, type RedisProcess } from '../../../floodgate/test/support/redis-server.js'
import { checkBody, postJson, startTestService, type TestService } from './helpers.js'

const RULES = `domain: auto
descriptors:
  - key: bucket
    limits: [{ algorithm: token-bucket, limit: 100, period: 1h, sync: auto }]
  - key: cell
    limits: [{ algorithm: gcra, limit: 100, period: 1h, sync: auto }]
`

describe('service: cold auto keys on Redis', () => {
  let redis: RedisProcess
  let service: TestService
  before(async () => {
    redis = await startRedis()
    service = await startTestService(RULES, ['--redis', redis.url, '--redis-prefix', 'auto-cold:', '--store-timeout', '5s'])
  })
  after(async () => {
    await service?.stop()
    await redis?.stop()
  })

  for (const descriptor of ['bucket', 'cell']) {
    it(`${descriptor}: 10 cold keys, 10 store calls, no ledger read`, async () => {
      const url = `${service.httpUrl}/v1/check`
      // Scripts loaded before watching, so each call below is one EVALSHA naming its key.
      assert.equal((await postJson(url, checkBody('auto', [{ [descriptor]: 'warm' }]))).status, 200)
      const monitorClient = new Redis(redis.url)
      const monitor = await monitorClient.monitor()
      const calls: string[][] = []
      // Only the service's own commands: MONITOR also lists what a script calls, tagged 'lua'.
      monitor.on('monitor', (_time: string, args: string[], source: string) => {
        if (!source.startsWith('lua')) calls.push(args)
      })
      try {
        for (let i = 0; i < 10; i++) {
          assert.equal((await postJson(url, checkBody('auto', [{ [descriptor]: `cold-${i}` }]))).status, 200)
        }
        // MONITOR shows a command once it ran: wait for the last key to appear (a state, not a time).
        const pinger = new Redis(redis.url)
        try {
          for (let tries = 0; tries < 200 && !calls.some((args) => args.some((arg) => arg.includes('cold-9'))); tries++) await pinger.ping()
        } finally {
          pinger.disconnect()
        }
      } finally {
        monitor.disconnect()
        monitorClient.disconnect()
      }
      const cold = calls.filter((args) => args.some((arg) => arg.includes('cold-')))
      assert.equal(cold.length, 10, `one store call per cold decision: ${JSON.stringify(cold)}`)
      const ledgerReads = cold.filter((args) => args.some((arg) => arg.endsWith('#l')))
      assert.deepEqual(ledgerReads, [], "a cold key reads no lease ledger: exact's script, not the lease script")
    })
  }
})
