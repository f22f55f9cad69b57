// The dashboard handler on a real node:http server and mounted in Express: the token, the routes, the JSON.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import express from 'express'
import { DashboardCollector, dashboardHandler } from '../../src/dashboard.js'

const TOKEN = 'dashboard-secret'
const bearer = { authorization: `Bearer ${TOKEN}` }

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

describe('dashboardHandler on node:http', () => {
  const collector = new DashboardCollector()
  const server = createServer(dashboardHandler({ collector, token: TOKEN }))
  let url = ''
  before(async () => {
    url = await listen(server)
  })
  after(() => server.close())

  it('asks for the token, with a Basic challenge a browser answers', async () => {
    const wrongBasic = { authorization: `Basic ${Buffer.from('admin:nope').toString('base64')}` }
    for (const headers of [{} as Record<string, string>, { authorization: 'Bearer wrong-token' }, wrongBasic]) {
      const response = await fetch(`${url}/dashboard/data.json`, { headers })
      assert.equal(response.status, 401)
      assert.match(response.headers.get('www-authenticate') ?? '', /^Basic realm="floodgate-dashboard"/)
    }
  })

  it('serves the snapshot to a bearer token and to Basic with the token as password', async () => {
    collector.record('login', 'user:1', 2, 1)
    for (const headers of [bearer, { authorization: `Basic ${Buffer.from(`anyone:${TOKEN}`).toString('base64')}` }]) {
      const response = await fetch(`${url}/dashboard/data.json`, { headers })
      assert.equal(response.status, 200)
      assert.equal(response.headers.get('cache-control'), 'no-store')
      const snapshot = await response.json()
      assert.deepEqual(snapshot.totals, { allowed: 2, denied: 1 })
    }
  })

  it('serves the page, its script and the chart library from itself, and redirects to the trailing slash', async () => {
    const page = await fetch(`${url}/dashboard/`, { headers: bearer })
    assert.equal(page.status, 200)
    const html = await page.text()
    assert.match(html, /<script src="uplot.js"><\/script>/)
    // Only what the page loads counts: the inline favicon's SVG namespace URI is a name, not a fetch.
    assert.doesNotMatch(html, /(src|href)="https?:/, 'no asset from elsewhere')
    assert.match(html, /<link rel="icon" href="data:image\/svg\+xml,/)
    assert.match(page.headers.get('content-security-policy') ?? '', /default-src 'self'/)
    const uplot = await fetch(`${url}/dashboard/uplot.js`, { headers: bearer })
    assert.equal(uplot.status, 200)
    assert.match(await uplot.text(), /uPlot/)
    assert.equal((await fetch(`${url}/dashboard/app.js`, { headers: bearer })).status, 200)
    const bare = await fetch(`${url}/dashboard`, { headers: bearer, redirect: 'manual' })
    assert.equal(bare.status, 308)
    assert.equal(bare.headers.get('location'), 'dashboard/')
    assert.equal((await fetch(`${url}/dashboard/nope`, { headers: bearer })).status, 404)
    assert.equal((await fetch(`${url}/elsewhere`, { headers: bearer })).status, 404)
    assert.equal((await fetch(`${url}/dashboard/data.json`, { method: 'POST', headers: bearer })).status, 405)
  })

  it('refuses a token too short to guard anything', () => {
    assert.throws(() => dashboardHandler({ collector, token: 'short' }), { code: 'INVALID_OPTION', message: /token/ })
  })
})

describe('dashboardHandler in Express', () => {
  it('answers under its mount path and passes other requests on', async () => {
    const collector = new DashboardCollector()
    collector.record('api', 'k', 1, 0)
    const app = express()
    app.use('/ops/dashboard', dashboardHandler({ collector, token: TOKEN, path: '/ops/dashboard' }))
    app.use(dashboardHandler({ collector, token: TOKEN, path: '/other' }))
    app.get('/', (_request, response) => {
      response.send('app')
    })
    const server = createServer(app)
    const url = await listen(server)
    try {
      const data = await fetch(`${url}/ops/dashboard/data.json`, { headers: bearer })
      assert.equal(data.status, 200)
      assert.equal((await data.json()).totals.allowed, 1)
      assert.equal(await (await fetch(`${url}/`)).text(), 'app')
    } finally {
      server.close()
    }
  })
})
