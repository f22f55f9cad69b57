// Hot reload through the running service: a new rules file applies to the next decision; a bad one keeps the old rules.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { writeFileSync } from 'node:fs'
import { checkBody, postJson, scrape, startTestService } from './helpers.js'

const ADMIN_TOKEN = 'reload-admin-token'

const rulesWithLimit = (n: number) => `
domain: test
descriptors:
  - key: user
    rate_limit: { unit: day, requests_per_unit: ${n} }
`

/** Polls until `probe` holds or the deadline passes (file watching is asynchronous). */
async function eventually(probe: () => Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (await probe()) return
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  assert.fail(`timed out waiting for ${what}`)
}

describe('hot reload', () => {
  it('uses a rewritten rules file for the next decision and keeps the old rules when the new file is invalid', async () => {
    const service = await startTestService(rulesWithLimit(5), ['--admin-token', ADMIN_TOKEN])
    try {
      const limitOf = async () =>
        (await postJson(`${service.httpUrl}/v1/check`, checkBody('test', [{ user: 'r' }], 0))).body.results[0].limit
      assert.equal(await limitOf(), 5)
      const reloadsBefore = (await scrape(service.httpUrl)).get('floodgate_config_reloads_total{result="success"}') ?? 0

      writeFileSync(service.rulesFile, rulesWithLimit(7))
      await eventually(async () => (await limitOf()) === 7, 'the new limit')
      const afterGood = await scrape(service.httpUrl)
      assert.ok((afterGood.get('floodgate_config_reloads_total{result="success"}') ?? 0) > reloadsBefore)
      assert.equal(afterGood.get('floodgate_config_reloads_total{result="error"}'), 0)

      writeFileSync(
        service.rulesFile,
        'domain: test\ndescriptors:\n  - key: user\n    rate_limit: { unit: fortnight, requests_per_unit: 1 }\n',
      )
      await eventually(
        async () => ((await scrape(service.httpUrl)).get('floodgate_config_reloads_total{result="error"}') ?? 0) >= 1,
        'the reload error metric',
      )
      assert.equal(await limitOf(), 7, 'the last good rules keep serving')
      // Public readiness names the reason only; the issues (with file paths) are behind the admin token.
      const ready = (await (await fetch(`${service.httpUrl}/readyz`)).json()) as { status: string; reason: string; rulesError?: string[] }
      assert.deepEqual(ready, { status: 'ready', reason: 'rules_reload_failed' })
      const health = (await (
        await fetch(`${service.httpUrl}/admin/health`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
      ).json()) as { rulesError: string[] }
      assert.match(health.rulesError.join('\n'), /unknown unit "fortnight"/)
    } finally {
      await service.stop()
    }
  })

  it('with --no-watch, reloads only when asked (SIGHUP), keeping the old rules on errors', async () => {
    const service = await startTestService(rulesWithLimit(5), ['--no-watch'])
    try {
      const limitOf = async () =>
        (await postJson(`${service.httpUrl}/v1/check`, checkBody('test', [{ user: 'r' }], 0))).body.results[0].limit
      writeFileSync(service.rulesFile, rulesWithLimit(9))
      await new Promise((resolve) => setTimeout(resolve, 300))
      assert.equal(await limitOf(), 5, 'not watched')
      assert.equal(service.reloadRules(), true)
      assert.equal(await limitOf(), 9)
      writeFileSync(service.rulesFile, 'domain: ""\n')
      assert.equal(service.reloadRules(), false)
      assert.equal(await limitOf(), 9)
      assert.equal((await scrape(service.httpUrl)).get('floodgate_config_reloads_total{result="error"}'), 1)
    } finally {
      await service.stop()
    }
  })
})
