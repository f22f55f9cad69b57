// The admin API under /admin (bearer token): the loaded rules, peeking at a descriptor's state, resetting it.

import { timingSafeEqual, createHash } from 'node:crypto'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { z } from 'zod'
import { FloodgateError } from 'floodgate'
import type { RuleSetDescription } from 'floodgate/rules'
import type { Decider, Entry } from './decide.js'
import { readiness, type HealthReport } from './http-server.js'

export interface AdminOptions {
  /** The bearer token every admin call must present. */
  token: string
  decider: Decider
  /** The loaded rules, described. */
  describeRules: () => RuleSetDescription
  /** The service's health, in full (the public /readyz shows only a status and a reason code). */
  health: () => HealthReport
}

const keyQuery = z.object({
  domain: z.string({ error: 'required, e.g. ?domain=edge' }).min(1, 'must not be empty'),
  descriptor: z.string({ error: 'required, e.g. &descriptor=user=alice,path=/login' }).min(1, 'must not be empty'),
})

const resetBody = z.object({
  domain: z.string({ error: 'expected a string' }).min(1, 'must not be empty'),
  descriptor: z.array(z.object({ key: z.string().min(1), value: z.string() }), { error: 'expected a list of { "key", "value" }' }).min(1),
})

/** Registers the admin routes; every route answers 401 without the right `Authorization: Bearer <token>`. */
export function registerAdminRoutes(app: FastifyInstance, options: AdminOptions): void {
  const expected = digest(options.token)
  const authorize = async (request: FastifyRequest, reply: FastifyReply) => {
    const header = request.headers.authorization ?? ''
    const match = /^Bearer\s+(.+)$/i.exec(header)
    // Compare digests in constant time so the token cannot be guessed byte by byte from timings.
    if (match === null || !timingSafeEqual(digest(match[1].trim()), expected)) {
      reply.header('www-authenticate', 'Bearer realm="floodgate-admin"')
      return reply.code(401).send({ error: 'unauthorized', message: 'send Authorization: Bearer <admin token>' })
    }
  }

  app.get('/admin/rules', { onRequest: authorize }, async () => options.describeRules())

  app.get('/admin/health', { onRequest: authorize }, async () => {
    const health = options.health()
    const { status, reason } = readiness(health)
    const message =
      reason === 'shard_unreachable'
        ? `store shards unreachable (${health.shardsUnreachable?.join(', ')}): their keys are decided with ` +
          `onStoreError=${health.onStoreError}, the others by the store`
        : status === 'degraded'
          ? `store unreachable: deciding with onStoreError=${health.onStoreError} until it returns`
          : status === 'ready'
            ? reason === 'ok'
              ? 'rules loaded and store reachable'
              : 'the latest rules reload failed; the previous rules keep serving'
            : 'not accepting decisions (starting or shutting down)'
    return { status, reason, message, ...health }
  })

  app.get('/admin/keys', { onRequest: authorize }, async (request, reply) => {
    const { domain, descriptor } = parse(keyQuery, request.query, 'query')
    const entries = parseDescriptorParam(descriptor)
    const peeked = await options.decider.peek(domain, entries)
    if (peeked === undefined)
      return reply.code(404).send({ error: 'not_found', message: `no limited rule matches ${descriptor} in domain ${domain}` })
    return { domain, descriptor: entries, rule: peeked.rule.id, storeKey: peeked.rule.storeKey, decision: peeked.decision }
  })

  const reset = async (domain: string, entries: Entry[], reply: FastifyReply) => {
    const done = await options.decider.reset(domain, entries)
    if (!done) return reply.code(404).send({ error: 'not_found', message: `no limited rule matches this descriptor in domain ${domain}` })
    return { reset: true, domain, descriptor: entries }
  }
  app.delete('/admin/keys', { onRequest: authorize }, async (request, reply) => {
    const { domain, descriptor } = parse(keyQuery, request.query, 'query')
    return reset(domain, parseDescriptorParam(descriptor), reply)
  })
  app.post('/admin/keys/reset', { onRequest: authorize }, async (request, reply) => {
    const { domain, descriptor } = parse(resetBody, request.body, 'body')
    return reset(domain, descriptor, reply)
  })
}

/** `key=value,key2=value2` → entries; a value may contain `=` (only the first one splits). */
export function parseDescriptorParam(text: string): Entry[] {
  return text.split(',').map((part) => {
    const at = part.indexOf('=')
    if (at <= 0)
      throw new FloodgateError('INVALID_REQUEST', `descriptor: expected key=value pairs separated by commas, got ${JSON.stringify(part)}`)
    return { key: part.slice(0, at), value: part.slice(at + 1) }
  })
}

function parse<T>(schema: z.ZodType<T>, value: unknown, where: string): T {
  const parsed = schema.safeParse(value)
  if (parsed.success) return parsed.data
  const issue = parsed.error.issues[0]
  throw new FloodgateError('INVALID_REQUEST', `${[where, ...issue.path].join('.')}: ${issue.message}`)
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest()
}
