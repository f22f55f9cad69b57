// Every adapter (Express, Fastify, Koa, Hono, node:http) against the shared scenarios, on the embedded MemoryStore.

import { describe, it } from 'node:test'
import { MemoryStore } from '../../src/stores/memory/memory-store.js'
import { FRAMEWORKS } from './support/apps.js'
import { scenarios, shapingScenarios } from './support/scenarios.js'

for (const framework of FRAMEWORKS) {
  describe(`${framework.name} adapter (memory store)`, () => {
    for (const [name, scenario] of Object.entries({ ...scenarios, ...shapingScenarios })) {
      it(name, () => scenario({ framework, newStore: () => new MemoryStore() }))
    }
  })
}
