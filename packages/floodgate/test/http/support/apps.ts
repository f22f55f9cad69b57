// The same small app in each framework, listening on loopback, so every adapter faces the same scenarios.
// Routes: GET /ok → 200, GET /fail → 500, GET /decision → the decision the adapter exposed, as JSON.

import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import express from 'express'
import express4 from 'express4'
import Fastify from 'fastify'
import Koa from 'koa'
import { Hono } from 'hono'
import { serve } from '@hono/node-server'
import type { HttpLimitOptions } from '../../../src/http/options.js'
import { rateLimit as expressRateLimit } from '../../../src/express.js'
import { floodgate } from '../../../src/fastify.js'
import { rateLimit as koaRateLimit } from '../../../src/koa.js'
import { rateLimit as honoRateLimit, type RateLimitVariables } from '../../../src/hono.js'
import { withRateLimit } from '../../../src/node.js'

/** Options the scenarios share; functions take `unknown` requests so every framework accepts them. */
export type SharedOptions = HttpLimitOptions<unknown>

export interface RunningApp {
  /** `http://127.0.0.1:<port>` */
  url: string
  close(): Promise<void>
}

export interface Framework {
  name: string
  start(options: SharedOptions): Promise<RunningApp>
}

async function listening(server: Server): Promise<RunningApp> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections()
        server.close((error) => (error ? reject(error) : resolve()))
      }),
  }
}

/** The same app on Express 5 (`express`) and Express 4 (`express4`, npm:express@4): the adapter supports both. */
function expressFramework(name: string, createApp: typeof express): Framework {
  return {
    name,
    async start(options) {
      const app = createApp()
      app.use(expressRateLimit(options))
      app.get('/ok', (_req, res) => void res.send('ok'))
      app.get('/fail', (_req, res) => void res.status(500).send('fail'))
      app.get('/decision', (req, res) => void res.json(req.rateLimit ?? null))
      return listening(createServer(app))
    },
  }
}

const expressApp = expressFramework('express', express)
const express4App = expressFramework('express 4', express4)

const fastifyApp: Framework = {
  name: 'fastify',
  async start(options) {
    const app = Fastify()
    await app.register(floodgate, options)
    app.get('/ok', async () => 'ok')
    app.get('/fail', async (_request, reply) => reply.code(500).send('fail'))
    app.get('/decision', async (request) => request.rateLimit)
    await app.listen({ port: 0, host: '127.0.0.1' })
    const { port } = app.server.address() as AddressInfo
    return { url: `http://127.0.0.1:${port}`, close: () => app.close() }
  },
}

const koaApp: Framework = {
  name: 'koa',
  async start(options) {
    const app = new Koa()
    app.use(koaRateLimit(options))
    app.use(async (ctx) => {
      if (ctx.path === '/ok') ctx.body = 'ok'
      else if (ctx.path === '/fail') {
        ctx.status = 500
        ctx.body = 'fail'
      } else if (ctx.path === '/decision') ctx.body = ctx.state.rateLimit ?? null
    })
    return listening(createServer(app.callback()))
  },
}

const honoApp: Framework = {
  name: 'hono',
  async start(options) {
    const app = new Hono<{ Variables: RateLimitVariables }>()
    app.use(honoRateLimit(options))
    app.get('/ok', (c) => c.text('ok'))
    app.get('/fail', (c) => c.text('fail', 500))
    app.get('/decision', (c) => c.json(c.get('rateLimit') ?? null))
    const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }) as Server
    await new Promise<void>((resolve) => (server.listening ? resolve() : server.once('listening', () => resolve())))
    const { port } = server.address() as AddressInfo
    return {
      url: `http://127.0.0.1:${port}`,
      close: () =>
        new Promise<void>((resolve) => {
          server.closeAllConnections()
          server.close(() => resolve())
        }),
    }
  },
}

const nodeApp: Framework = {
  name: 'node',
  async start(options) {
    const handle = withRateLimit((req, res) => {
      if (req.url === '/decision') {
        res.setHeader('Content-Type', 'application/json')
        res.end(JSON.stringify(req.rateLimit ?? null))
        return
      }
      res.statusCode = req.url === '/fail' ? 500 : 200
      res.end(req.url === '/fail' ? 'fail' : 'ok')
    }, options)
    return listening(createServer((req, res) => void handle(req, res)))
  },
}

export const FRAMEWORKS: readonly Framework[] = [expressApp, express4App, fastifyApp, koaApp, honoApp, nodeApp]

export interface Reply {
  status: number
  headers: Headers
  text: string
}

/** One GET against a running app; `forwardedFor` sets X-Forwarded-For (the test acting as a proxy). */
export async function get(app: RunningApp, path: string, headers: Record<string, string> = {}): Promise<Reply> {
  const response = await fetch(`${app.url}${path}`, { headers })
  return { status: response.status, headers: response.headers, text: await response.text() }
}
