// /dashboard in a real headless Chromium (Debian's, driven by playwright-core), under a small load on
// loopback: charts drawn, totals equal to /metrics, the denied key in the top-keys table, the write-back
// rule's state in the sync panel, a screenshot kept.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import type { Page } from 'playwright-core'
import { hashKey, type DashboardSnapshot } from 'floodgate/dashboard'
import { storeKeyOf } from 'floodgate/rules'
import { checkBody, postJson, startTestService, type TestService } from '../service/helpers.js'
import { ARTIFACTS, type Browser, launchChromium } from './chromium.js'

const TOKEN = 'dashboard-test-token'
const RULES = `
domain: shop
descriptors:
  - key: user
    rate_limit: { unit: day, requests_per_unit: 5 }
  - key: path
    limits:
      - { name: per-path, algorithm: token-bucket, limit: 100000, period: 1h }
  - key: tenant
    limits:
      - { name: per-tenant, algorithm: fixed-window, limit: 100000, period: 1h, sync: write-back }
`

/** Sums every series of a counter in a Prometheus exposition. */
function sumOf(metrics: string, name: string): number {
  let total = 0
  for (const line of metrics.split('\n')) {
    if (line.startsWith(`${name}{`) || line.startsWith(`${name} `)) total += Number(line.slice(line.lastIndexOf(' ') + 1))
  }
  return total
}

/** Polls `check` until it holds (generous bound, no elapsed-time assertion). */
async function until<T>(what: string, check: () => Promise<T | undefined>, attempts = 120): Promise<T> {
  for (let i = 0; i < attempts; i++) {
    const value = await check()
    if (value !== undefined) return value
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
  throw new Error(`timed out waiting for ${what}`)
}

describe('/dashboard in headless Chromium', { timeout: 180_000 }, () => {
  let service: TestService
  let browser: Browser | undefined
  let page: Page
  const check = (pairs: Record<string, string>[]) => postJson(`${service.httpUrl}/v1/check`, checkBody('shop', pairs))
  /** A small bounded burst: 20 users within their limit, one (`mallory`) far over it. */
  const load = async (round: number) => {
    const calls: Promise<unknown>[] = []
    for (let i = 0; i < 20; i++) calls.push(check([{ user: `u${round}-${i}` }, { path: '/cart' }]))
    for (let i = 0; i < 15; i++) calls.push(check([{ user: 'mallory' }]))
    await Promise.all(calls)
  }
  const metrics = async () => (await fetch(`${service.httpUrl}/metrics`)).text()
  type DashboardWindow = { floodgateDashboard: { refresh(): Promise<DashboardSnapshot> } }
  const refresh = () => page.evaluate(() => (window as unknown as DashboardWindow).floodgateDashboard.refresh())
  const shown = async (id: string) => Number((await page.textContent(`#${id}`))!.replace(/,/g, ''))

  before(async () => {
    service = await startTestService(RULES, ['--admin-token', TOKEN])
    browser = await launchChromium({ username: 'admin', password: TOKEN })
    page = browser.context.pages()[0] ?? (await browser.context.newPage())
  })
  after(async () => {
    await browser?.close()
    await service?.stop()
  })

  it('asks a browser without the token to log in', async () => {
    const response = await fetch(`${service.httpUrl}/dashboard/`)
    assert.equal(response.status, 401)
    assert.match(response.headers.get('www-authenticate') ?? '', /^Basic/)
  })

  it('draws non-empty charts from its own assets under load', async () => {
    const external: string[] = []
    page.on('request', (request) => {
      if (!request.url().startsWith(service.httpUrl)) external.push(request.url())
    })
    await load(0)
    await page.goto(`${service.httpUrl}/dashboard`)
    assert.equal(page.url(), `${service.httpUrl}/dashboard/`)
    // uPlot draws on a canvas: count the pixels of the allowed line's colour (#1a7f37) and the denied one's (#cf222e).
    const ink = () =>
      page.evaluate(() => {
        const canvas = document.querySelector('#chart-decisions canvas') as HTMLCanvasElement
        const pixels = canvas.getContext('2d')!.getImageData(0, 0, canvas.width, canvas.height).data
        let green = 0
        let red = 0
        for (let i = 0; i < pixels.length; i += 4) {
          const [r, g, b, a] = [pixels[i], pixels[i + 1], pixels[i + 2], pixels[i + 3]]
          if (a > 200 && Math.abs(r - 0x1a) < 40 && Math.abs(g - 0x7f) < 40 && Math.abs(b - 0x37) < 40) green++
          if (a > 200 && Math.abs(r - 0xcf) < 40 && Math.abs(g - 0x22) < 40 && Math.abs(b - 0x2e) < 40) red++
        }
        return { green, red }
      })
    // The series hold whole seconds only: keep a little load going until seconds with decisions have
    // passed and both lines show. Where the two lines run together (at zero, or at close counts in a
    // second), the one drawn last covers the other, so a busy machine that fits few rounds in a second
    // needs more of them before the denied line shows clear of the allowed one.
    let round = 1
    let inked = { green: 0, red: 0 }
    await until('both lines of a charted second with decisions', async () => {
      await load(round++)
      const snapshot = await refresh()
      if (!snapshot.series.allowed.some((v) => v > 0) || !snapshot.series.denied.some((v) => v > 0)) return undefined
      inked = await ink()
      return inked.green > 20 && inked.red > 20 ? true : undefined
    }).catch((error: Error) => assert.fail(`${error.message}: ${JSON.stringify(inked)}`))
    assert.ok(await page.$('#chart-rules-denied canvas'), 'the per-rule chart is drawn')
    assert.deepEqual(external, [], 'nothing is fetched from elsewhere')
  })

  it('shows allowed and denied totals equal to /metrics, within one refresh', async () => {
    // Refreshed by the test alone: the page's own timer cannot redraw between a refresh and the reading.
    await page.goto(`${service.httpUrl}/dashboard/?refresh=manual`)
    await until('the first manual refresh', async () => ((await page.getAttribute('body', 'data-refreshes')) === '1' ? true : undefined))
    // Under load: the page's figure lies between a scrape before its refresh and one after.
    const loading = Promise.all([load(100), load(101)])
    const before = await metrics()
    await refresh()
    const after = await metrics()
    await loading
    const allowed = await shown('total-allowed')
    const denied = await shown('total-denied')
    assert.ok(sumOf(before, 'floodgate_within_limit') <= allowed && allowed <= sumOf(after, 'floodgate_within_limit'), `allowed ${allowed}`)
    assert.ok(sumOf(before, 'floodgate_over_limit') <= denied && denied <= sumOf(after, 'floodgate_over_limit'), `denied ${denied}`)
    // Once the load stops, one refresh shows exactly what /metrics says.
    await refresh()
    const settled = await metrics()
    assert.equal(await shown('total-allowed'), sumOf(settled, 'floodgate_within_limit'))
    assert.equal(await shown('total-denied'), sumOf(settled, 'floodgate_over_limit'))
    assert.ok((await shown('total-denied')) > 0)
  })

  it('lists the key being denied first among the top limited keys, hashed', async () => {
    await refresh()
    const rows = await page.$$eval('#top-keys tbody tr', (trs) =>
      trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)),
    )
    const mallory = hashKey(storeKeyOf('shop', [{ key: 'user', value: 'mallory' }]))
    assert.equal(rows[0]?.[0], mallory, JSON.stringify(rows))
    assert.ok(!(await page.content()).includes('mallory'), 'no raw key on the page')
    const rules = await page.$$eval('#rules tbody tr td:first-child', (tds) => tds.map((td) => td.textContent))
    assert.ok(rules.includes('shop.user') && rules.includes('shop.path'), JSON.stringify(rules))
    assert.equal(await page.textContent('#config'), `rules loaded3files${service.rulesFile}last reloadok`)
  })

  it("shows a write-back rule's state in the sync panel", async () => {
    for (let i = 0; i < 3; i++) await check([{ tenant: 'acme' }])
    const snapshot = await refresh()
    const writeBack = snapshot.sync?.writeBack
    assert.ok(writeBack !== null && writeBack !== undefined && writeBack.keys >= 1, JSON.stringify(snapshot.sync))
    assert.equal(await page.isVisible('#sync-panel'), true)
    const shownPairs = await page.$$eval('#sync dt', (dts) =>
      dts.map((dt) => [dt.textContent, dt.nextElementSibling?.textContent] as const),
    )
    const pairs = new Map(shownPairs)
    assert.equal(pairs.get('write-back keys'), String(writeBack.keys), JSON.stringify(shownPairs))
    // Unflushed units depend on when the service's own flush tick ran: the page shows what data.json said.
    assert.equal(pairs.get('unflushed units'), String(writeBack.unflushed))
    assert.ok(!shownPairs.some(([, value]) => value === '' || value === undefined), JSON.stringify(shownPairs))
    mkdirSync(ARTIFACTS, { recursive: true })
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard.png'), fullPage: true })
  })
})
