// The service on a real Redis Cluster (--redis-cluster): descriptors spread over slots, each limited exactly.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { startCluster, type RedisClusterHandle } from '../../../floodgate/test/support/redis-cluster.js'
import { checkBody, postJson, rlsClients, startTestService, type TestService } from './helpers.js'

describe('service on Redis Cluster', () => {
  let cluster: RedisClusterHandle
  let service: TestService
  before(async () => {
    cluster = await startCluster({ masters: 3, replicasPerMaster: 0 })
    const nodes = cluster.startupNodes.map((n) => `${n.host}:${n.port}`).join(',')
    service = await startTestService(undefined, ['--redis-cluster', nodes, '--store-timeout', '2s'])
  })
  after(async () => {
    await service?.stop()
    await cluster?.stop()
  })

  it('limits many users, whose keys live on different nodes, each at exactly its limit', async () => {
    const users = Array.from({ length: 12 }, (_, i) => `cluster-user-${i}`)
    const url = `${service.httpUrl}/v1/check`
    // All users in one request per round: the store batches them per node.
    const statuses: boolean[][] = []
    for (let round = 0; round < 4; round++) {
      const res = await postJson(
        url,
        checkBody(
          'test',
          users.map((user) => ({ user })),
        ),
      )
      statuses.push(
        res.body.results.map((r: { allowed: boolean; source: string }) => {
          assert.equal(r.source, 'store')
          return r.allowed
        }),
      )
    }
    for (const [i, user] of users.entries()) {
      assert.deepEqual(
        statuses.map((round) => round[i]),
        [true, true, true, false],
        user,
      )
    }
    const client = rlsClients(service.grpcPort)
    try {
      const response = await client.shouldRateLimit({ domain: 'test', descriptors: [{ entries: [{ key: 'user', value: users[0] }] }] })
      assert.equal(response.overall_code, 'OVER_LIMIT')
    } finally {
      client.close()
    }
  })
})
