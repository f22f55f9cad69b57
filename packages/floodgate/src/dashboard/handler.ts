// The dashboard as a node:http handler (also Express middleware, and a Fastify route through reply.raw), behind a token.

import { createHash, timingSafeEqual } from 'node:crypto'
import { readFileSync } from 'node:fs'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { createRequire } from 'node:module'
import { FloodgateError } from '../core/errors.js'
import type { DashboardCollector } from './collector.js'
import { PAGE_CSS, PAGE_SCRIPT, pageHtml } from './page.js'

export interface DashboardHandlerOptions {
  /** Where the figures come from. */
  collector: DashboardCollector
  /**
   * The token every request must present: `Authorization: Bearer <token>` (tools), or HTTP Basic
   * with any user name and the token as password (a browser asks for it once).
   */
  token: string
  /** The path the dashboard answers under (default `/dashboard`): the page, its assets and `data.json`. */
  path?: string
  /** The page's title (default `Floodgate`). */
  title?: string
  /**
   * Files of the chart library (uPlot): its `dist/uPlot.iife.min.js` and `dist/uPlot.min.css`.
   * By default they are read from the installed `uplot` package (an optional peer of floodgate:
   * `npm i uplot`); without it the page still shows every figure and table, with no charts.
   */
  chartLibrary?: { script: string; style: string }
}

/** A node:http handler; `next` (Express) is called for requests outside the dashboard's path. */
export type DashboardHandler = (request: IncomingMessage, response: ServerResponse, next?: (error?: unknown) => void) => void

/**
 * Serves the dashboard at `path`: `GET path/` the page, `GET path/data.json` the snapshot
 * (docs/dashboard.md), and the page's script, style and chart library. Every route needs the token;
 * nothing is fetched from elsewhere, so the page works offline and under a strict CSP.
 */
export function dashboardHandler(options: DashboardHandlerOptions): DashboardHandler {
  if (typeof options.token !== 'string' || options.token.length < 8) {
    throw new FloodgateError(
      'INVALID_OPTION',
      'token: give the dashboard a token of at least 8 characters (it guards key names and rule internals)',
    )
  }
  const base = (options.path ?? '/dashboard').replace(/\/+$/, '')
  if (!base.startsWith('/')) {
    throw new FloodgateError('INVALID_OPTION', `path: expected an absolute path such as /dashboard, got ${JSON.stringify(options.path)}`)
  }
  const expected = digest(options.token)
  const html = pageHtml(options.title ?? 'Floodgate')
  let library: { script: string; style: string } | null | undefined
  const chartLibrary = () => (library ??= loadChartLibrary(options.chartLibrary))

  return (request, response, next) => {
    // Express strips its mount path from `url`; `originalUrl` keeps the whole path.
    const url = (request as IncomingMessage & { originalUrl?: string }).originalUrl ?? request.url ?? '/'
    const path = url.split('?')[0]
    if (path !== base && !path.startsWith(`${base}/`)) {
      if (next !== undefined) return next()
      return send(response, 404, 'application/json', JSON.stringify({ error: 'not_found', message: `no route ${path}` }))
    }
    if (!authorized(request.headers.authorization, expected)) {
      response.setHeader('www-authenticate', 'Basic realm="floodgate-dashboard", charset="UTF-8"')
      const message = 'send Authorization: Bearer <token> (or Basic, the token as password)'
      return send(response, 401, 'application/json', JSON.stringify({ error: 'unauthorized', message }))
    }
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      response.setHeader('allow', 'GET, HEAD')
      const body = JSON.stringify({ error: 'method_not_allowed', message: 'the dashboard is read-only: GET' })
      return send(response, 405, 'application/json', body)
    }
    const rest = path.slice(base.length)
    if (rest === '') {
      // The page's assets are relative URLs: they resolve under the path only with its trailing slash.
      // The redirect is relative too, so it holds behind a proxy that adds a prefix.
      response.setHeader('location', `${base.slice(base.lastIndexOf('/') + 1)}/`)
      return send(response, 308, 'text/plain; charset=utf-8', 'see the dashboard at its path with a trailing slash\n')
    }
    if (rest === '/') return send(response, 200, 'text/html; charset=utf-8', html)
    if (rest === '/data.json') return send(response, 200, 'application/json', JSON.stringify(options.collector.snapshot()))
    if (rest === '/app.js') return send(response, 200, 'text/javascript; charset=utf-8', PAGE_SCRIPT)
    if (rest === '/app.css') return send(response, 200, 'text/css; charset=utf-8', PAGE_CSS)
    if (rest === '/uplot.js' || rest === '/uplot.css') {
      const files = chartLibrary()
      if (files === null) return send(response, 404, 'text/plain; charset=utf-8', '/* uplot is not installed: npm i uplot */\n')
      return rest === '/uplot.js'
        ? send(response, 200, 'text/javascript; charset=utf-8', files.script)
        : send(response, 200, 'text/css; charset=utf-8', files.style)
    }
    return send(response, 404, 'application/json', JSON.stringify({ error: 'not_found', message: `no dashboard route ${path}` }))
  }
}

/** The uPlot files given, or those of the installed package; null when there is none. */
function loadChartLibrary(given: DashboardHandlerOptions['chartLibrary']): { script: string; style: string } | null {
  if (given !== undefined) return { script: readFileSync(given.script, 'utf8'), style: readFileSync(given.style, 'utf8') }
  try {
    const require = createRequire(import.meta.url)
    return {
      script: readFileSync(require.resolve('uplot/dist/uPlot.iife.min.js'), 'utf8'),
      style: readFileSync(require.resolve('uplot/dist/uPlot.min.css'), 'utf8'),
    }
  } catch {
    return null
  }
}

function authorized(header: string | undefined, expected: Buffer): boolean {
  if (header === undefined) return false
  const bearer = /^Bearer\s+(.+)$/i.exec(header)
  let presented: string | undefined
  if (bearer !== null) presented = bearer[1].trim()
  else {
    const basic = /^Basic\s+([A-Za-z0-9+/=]+)$/i.exec(header)
    if (basic !== null) {
      const decoded = Buffer.from(basic[1], 'base64').toString('utf8')
      presented = decoded.slice(decoded.indexOf(':') + 1)
    }
  }
  // Digests compared in constant time, so the token cannot be guessed byte by byte from timings.
  return presented !== undefined && timingSafeEqual(digest(presented), expected)
}

function send(response: ServerResponse, status: number, type: string, body: string): void {
  response.statusCode = status
  response.setHeader('content-type', type)
  response.setHeader('cache-control', 'no-store')
  response.setHeader('x-content-type-options', 'nosniff')
  response.setHeader('x-frame-options', 'DENY')
  response.setHeader('content-security-policy', "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'")
  response.setHeader('content-length', Buffer.byteLength(body))
  response.end(response.req?.method === 'HEAD' ? undefined : body)
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest()
}
