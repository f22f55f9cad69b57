// Every adapter against the shared scenarios with state in a real Redis (a throwaway redis-server).

import { after, before, describe, it } from 'node:test'
import { Redis } from 'ioredis'
import { RedisStore } from '../../src/stores/redis/redis-store.js'
import { startRedis, type RedisProcess } from '../support/redis-server.js'
import { FRAMEWORKS } from './support/apps.js'
import { scenarios, shapingScenarios } from './support/scenarios.js'

let redis: RedisProcess
let client: Redis
let stores = 0

before(async () => {
  redis = await startRedis()
  client = new Redis(redis.port, redis.host, { lazyConnect: true })
  await client.connect()
})

after(async () => {
  await client.quit()
  await redis.stop()
})

// One client for all; a fresh key prefix per scenario stands for a fresh store.
const newStore = () => new RedisStore({ client, prefix: `http${++stores}:` })

for (const framework of FRAMEWORKS) {
  describe(`${framework.name} adapter (Redis store)`, () => {
    for (const [name, scenario] of Object.entries({ ...scenarios, ...shapingScenarios })) {
      it(name, () => scenario({ framework, newStore }))
    }
  })
}
