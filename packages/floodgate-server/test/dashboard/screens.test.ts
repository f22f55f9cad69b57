// /dashboard on a phone (390 px) and a desktop (1280 px) in headless Chromium: no console error (a
// favicon is served), no sideways scroll, "no data yet" and every loaded rule before any traffic,
// and each rule's colour kept while the rules change rank.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import type { Page } from 'playwright-core'
import type { DashboardSnapshot } from 'floodgate/dashboard'
import { checkBody, postJson, startTestService, type TestService } from '../service/helpers.js'
import { ARTIFACTS, launchChromium, until, type Browser } from './chromium.js'

const TOKEN = 'dashboard-screens-token'
const RULES = `
domain: shop
descriptors:
  - key: user
    rate_limit: { unit: day, requests_per_unit: 1000000 }
  - key: path
    limits:
      - { name: per-path, algorithm: token-bucket, limit: 1000000, period: 1h }
  - key: tenant
    limits:
      - { name: per-tenant, algorithm: fixed-window, limit: 1000000, period: 1h }
`
const RULE_IDS = ['shop.user', 'shop.path', 'shop.tenant']

type DashboardWindow = {
  floodgateDashboard: {
    refresh(): Promise<DashboardSnapshot>
    palette: string[]
    decisionColors: Record<string, string>
  }
}

/** A page with every console error, failed request and uncaught exception recorded. */
async function openPage(browser: Browser, url: string, width = 1280): Promise<{ page: Page; problems: string[] }> {
  const page = await browser.context.newPage()
  await page.setViewportSize({ width, height: 900 })
  const problems: string[] = []
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console: ${message.text()}`)
  })
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`))
  page.on('response', (response) => {
    if (response.status() >= 400) problems.push(`${response.status()} ${response.url()}`)
  })
  await page.goto(url)
  await until('the first refresh', async () => ((await page.getAttribute('body', 'data-refreshes')) === '1' ? true : undefined))
  return { page, problems }
}

const refresh = (page: Page) => page.evaluate(() => (window as unknown as DashboardWindow).floodgateDashboard.refresh())

/** Each rule's line colour, as the per-rule chart's legend shows it, and its swatch in the rules table. */
const shownColours = (page: Page) =>
  page.evaluate(() => {
    const legend: Record<string, string> = {}
    for (const row of document.querySelectorAll('#chart-rules-allowed .u-legend .u-series')) {
      const label = row.querySelector('.u-label')?.textContent ?? ''
      const marker = row.querySelector('.u-marker') as HTMLElement | null
      if (marker && label !== '' && label !== 'Time') legend[label] = getComputedStyle(marker).borderTopColor
    }
    const table: Record<string, string> = {}
    for (const row of document.querySelectorAll<HTMLElement>('#rules tbody tr')) {
      const swatch = row.querySelector('.swatch') as HTMLElement | null
      if (swatch && row.dataset.rule) table[row.dataset.rule] = getComputedStyle(swatch).backgroundColor
    }
    return { legend, table }
  })

/** "Redmean" colour distance: a cheap stand-in for how far apart two colours look. */
function distance(a: string, b: string): number {
  const [r1, g1, b1] = [1, 3, 5].map((i) => Number.parseInt(a.slice(i, i + 2), 16))
  const [r2, g2, b2] = [1, 3, 5].map((i) => Number.parseInt(b.slice(i, i + 2), 16))
  const r = (r1 + r2) / 2
  return Math.sqrt((2 + r / 256) * (r1 - r2) ** 2 + 4 * (g1 - g2) ** 2 + (2 + (255 - r) / 256) * (b1 - b2) ** 2)
}

describe('/dashboard on a phone and a desktop', { timeout: 240_000 }, () => {
  let service: TestService
  let browser: Browser
  const check = (pair: Record<string, string>, hits: number) => postJson(`${service.httpUrl}/v1/check`, checkBody('shop', [pair], hits))

  before(async () => {
    service = await startTestService(RULES, ['--admin-token', TOKEN])
    browser = await launchChromium({ username: 'admin', password: TOKEN })
    mkdirSync(ARTIFACTS, { recursive: true })
  })
  after(async () => {
    await browser?.close()
    await service?.stop()
  })

  it('before any traffic: "no data yet" on the charts, every loaded rule at zero, no console error', async () => {
    const { page, problems } = await openPage(browser, `${service.httpUrl}/dashboard/?refresh=manual`)
    const notes = await page.$$eval('.chart .empty', (ps) => ps.map((p) => [p.parentElement?.id, p.textContent]))
    assert.deepEqual(
      new Map(notes as [string, string][]),
      new Map([
        ['chart-decisions', 'no decisions yet'],
        ['chart-rules-allowed', 'no rule has allowed anything yet'],
        ['chart-rules-denied', 'no rule has denied anything yet'],
      ]),
    )
    const rows = await page.$$eval('#rules tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)))
    assert.deepEqual(
      rows,
      RULE_IDS.map((id) => [id, '0.0', '0.0', '0', '0']),
      'every loaded rule, in file order',
    )
    assert.equal(await page.textContent('#top-keys tbody'), 'no key denied yet')
    // Without a favicon the browser asks /favicon.ico, and its 404 is a console error.
    assert.match(await page.$eval('link[rel=icon]', (link) => (link as HTMLLinkElement).href), /^data:image\/svg\+xml,/)
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard-empty.png'), fullPage: true })
    assert.deepEqual(problems, [])
    await page.close()
  })

  it('keeps each rule colour while the rules change rank; no rule colour near allowed, denied or fallback', async () => {
    const { page, problems } = await openPage(browser, `${service.httpUrl}/dashboard/?refresh=manual`)
    // First the user rule leads, then the tenant rule, then the path rule: each state is waited for.
    const phases: [Record<string, string>, number][][] = [
      [
        [{ user: 'u' }, 300],
        [{ path: '/a' }, 10],
      ],
      [
        [{ tenant: 't' }, 5_000],
        [{ path: '/a' }, 2_000],
      ],
      [[{ path: '/b' }, 20_000]],
    ]
    const leaders = ['shop.user', 'shop.tenant', 'shop.path']
    const seen: Record<string, string>[] = []
    const swatches: Record<string, string>[] = []
    for (let p = 0; p < phases.length; p++) {
      for (const [pair, hits] of phases[p]) assert.equal((await check(pair, hits)).status, 200)
      // The rates count whole seconds only: refresh until the second of this phase has passed.
      await until(`${leaders[p]} leading`, async () => ((await refresh(page)).rules[0]?.rule === leaders[p] ? true : undefined))
      const { legend, table } = await shownColours(page)
      seen.push(legend)
      swatches.push(table)
    }
    assert.deepEqual(Object.keys(seen[0]).sort(), ['shop.path', 'shop.user'])
    assert.deepEqual(Object.keys(seen[2]).sort(), ['shop.path', 'shop.tenant', 'shop.user'])
    for (const rule of Object.keys(seen[0])) assert.equal(seen[2][rule], seen[1][rule], `${rule} kept its colour`)
    for (const rule of Object.keys(seen[1])) assert.equal(seen[2][rule], seen[1][rule], `${rule} kept its colour`)
    for (const rule of Object.keys(seen[0])) assert.equal(seen[1][rule], seen[0][rule], `${rule} kept its colour`)
    assert.equal(new Set(Object.values(seen[2])).size, 3, 'three rules, three colours')
    assert.deepEqual(swatches, seen, "the rules table's swatches are the lines' colours")
    const { palette, decisionColors } = await page.evaluate(() => {
      const { palette, decisionColors } = (window as unknown as DashboardWindow).floodgateDashboard
      return { palette, decisionColors }
    })
    for (const colour of palette) {
      for (const [name, reserved] of Object.entries(decisionColors)) {
        assert.ok(distance(colour, reserved) > 100, `rule colour ${colour} is too close to ${name} ${reserved}`)
      }
    }
    assert.deepEqual(problems, [])
    await page.close()
  })

  for (const width of [390, 1280]) {
    it(`at ${width} px: no sideways scroll, every chart inside the screen, no console error`, async () => {
      const { page, problems } = await openPage(browser, `${service.httpUrl}/dashboard/?refresh=manual`, width)
      await check({ user: 'v' }, 1)
      await refresh(page)
      const layout = await page.evaluate(() => ({
        scrollWidth: document.documentElement.scrollWidth,
        innerWidth: window.innerWidth,
        widest: Math.max(...[...document.querySelectorAll('section, canvas, table')].map((el) => el.getBoundingClientRect().right)),
      }))
      assert.equal(layout.innerWidth, width)
      assert.ok(layout.scrollWidth <= layout.innerWidth, `page ${layout.scrollWidth} px wide in a ${width} px window`)
      assert.ok(layout.widest <= width, `an element reaches ${layout.widest} px in a ${width} px window`)
      await page.screenshot({ path: join(ARTIFACTS, `dashboard-${width}.png`), fullPage: true })
      assert.deepEqual(problems, [])
      await page.close()
    })
  }

  it('fits the charts to the screen again when it turns narrower (a phone rotated, a window resized)', async () => {
    const { page, problems } = await openPage(browser, `${service.httpUrl}/dashboard/?refresh=manual`, 1280)
    await page.setViewportSize({ width: 390, height: 900 })
    // The page redraws on resize after a short pause: wait for that state, not for a time.
    await until('the charts redrawn at 390 px', () =>
      page.evaluate(() => (document.documentElement.scrollWidth <= window.innerWidth ? true : undefined)),
    )
    assert.deepEqual(problems, [])
    await page.close()
  })
})
