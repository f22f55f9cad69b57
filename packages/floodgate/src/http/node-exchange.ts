// node:http request/response glue shared by the adapters built on it (node, Express, Fastify, Koa).

import type { IncomingMessage, ServerResponse } from 'node:http'
import type { HeaderList } from './headers.js'
import type { HttpExchange } from './limit-request.js'
import type { RejectBody } from './responses.js'

/** The path part of a request URL (no query string). */
export function pathOf(url: string | undefined): string {
  if (url === undefined) return '/'
  const query = url.indexOf('?')
  return query === -1 ? url : url.slice(0, query)
}

/** The neutral view of a node request; `url` and `route` let a framework supply what it knows better. */
export function nodeExchange(req: IncomingMessage, url = req.url, route?: string): HttpExchange {
  return {
    remoteAddress: req.socket?.remoteAddress,
    method: req.method ?? 'GET',
    path: pathOf(url),
    route,
    header(name) {
      const value = req.headers[name.toLowerCase()]
      return Array.isArray(value) ? value.join(', ') : value
    },
  }
}

/** Sets each header on a node response (before its head is written). */
export function setNodeHeaders(res: ServerResponse, headers: HeaderList): void {
  if (res.headersSent) return
  for (const [name, value] of headers) res.setHeader(name, value)
}

/** Writes a 429 rejection and ends the response. */
export function sendNodeRejection(res: ServerResponse, reject: RejectBody): void {
  if (res.headersSent) return
  res.statusCode = reject.status
  res.setHeader('Content-Type', reject.contentType)
  res.end(reject.body)
}

/**
 * Calls `finish` once the response is over: with the status when it was fully sent, `undefined`
 * when the connection closed first (the client went away — never counted as a success).
 */
export function onNodeResponseDone(res: ServerResponse, finish: (status: number | undefined) => void): void {
  res.once('close', () => finish(res.writableFinished ? res.statusCode : undefined))
}
