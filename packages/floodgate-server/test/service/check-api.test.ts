// The /v1/check fast paths hold to the slow ones: the hand-written body reader to the zod schema, the compiled
// answer serializer to JSON.stringify.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import Fastify, { type FastifyInstance } from 'fastify'
import {
  CHECK_RESPONSE_SCHEMA,
  MAX_DESCRIPTORS,
  MAX_ENTRIES,
  parseCheckRequest,
  parseCheckRequestWithSchema,
  toCheckResponse,
} from '../../src/service/check-api.js'
import type { DecideResult, DescriptorOutcome } from '../../src/service/decide.js'
import type { Decision, Policy } from 'floodgate'
import type { MatchedRule } from 'floodgate/rules'

/** What a parse gives: the input, or the message of the error it threw. */
function outcomeOf(parse: (body: unknown) => unknown, body: unknown): unknown {
  try {
    return { input: parse(body) }
  } catch (error) {
    return { error: (error as Error).message }
  }
}

const text = fc.oneof(fc.string({ maxLength: 6 }), fc.constantFrom('', 'user', '*'))
const oddValue = fc.oneof(fc.constant(null), fc.integer(), fc.boolean(), fc.constant([]), fc.constant({}))
const entry = fc.oneof(
  { weight: 6, arbitrary: fc.record({ key: text, value: text }) },
  fc.record({ key: fc.oneof(text, oddValue), value: fc.oneof(text, oddValue) }, { requiredKeys: [] }),
  fc.record({ key: text, value: text, extra: oddValue }),
  oddValue,
)
const descriptor = fc.oneof(
  { weight: 6, arbitrary: fc.array(entry, { minLength: 1, maxLength: 3 }) },
  fc.array(entry, { minLength: 0, maxLength: MAX_ENTRIES + 1 }),
  oddValue,
)
const body = fc.oneof(
  {
    weight: 8,
    arbitrary: fc.record(
      {
        domain: fc.oneof({ weight: 4, arbitrary: text }, oddValue),
        descriptors: fc.oneof(
          { weight: 6, arbitrary: fc.array(descriptor, { minLength: 1, maxLength: 3 }) },
          fc.array(descriptor, { minLength: 0, maxLength: 2 }),
          fc.constant(Array.from({ length: MAX_DESCRIPTORS + 1 }, () => [{ key: 'user', value: 'u' }])),
          oddValue,
        ),
        hits: fc.oneof(
          fc.integer({ min: -2, max: 5 }),
          fc.constantFrom(0, -0, 1.5, 1_000_000_000, 1_000_000_001, Number.NaN),
          fc.string(),
          oddValue,
        ),
        extra: oddValue,
      },
      { requiredKeys: ['domain', 'descriptors'] },
    ),
  },
  fc.jsonValue(),
)

describe('parseCheckRequest', () => {
  it('reads a well-formed body into the decider input, entries stripped to key and value', () => {
    const input = parseCheckRequest({
      domain: 'd',
      descriptors: [[{ key: 'user', value: 'a', note: 'x' }], [{ key: 'k', value: '' }]],
      hits: 0,
    })
    assert.deepEqual(input, {
      domain: 'd',
      hits: 0,
      descriptors: [{ entries: [{ key: 'user', value: 'a' }] }, { entries: [{ key: 'k', value: '' }] }],
    })
    assert.equal(parseCheckRequest({ domain: 'd', descriptors: [[{ key: 'k', value: 'v' }]] }).hits, 1)
  })

  it('answers every body exactly as the zod schema does: the same input, or the same reason', () => {
    fc.assert(
      fc.property(body, (candidate) => {
        assert.deepStrictEqual(outcomeOf(parseCheckRequest, candidate), outcomeOf(parseCheckRequestWithSchema, candidate))
      }),
      { numRuns: 2000 },
    )
  })
})

describe('CHECK_RESPONSE_SCHEMA', () => {
  let app: FastifyInstance
  let next: { status: 200 | 429; body: unknown } = { status: 200, body: {} }
  before(async () => {
    app = Fastify()
    app.post('/', { schema: { response: { 200: CHECK_RESPONSE_SCHEMA, 429: CHECK_RESPONSE_SCHEMA } } }, async (_request, reply) =>
      reply.code(next.status).send(next.body),
    )
    await app.ready()
  })
  after(async () => {
    await app.close()
  })

  const name = fc.oneof(fc.string(), fc.string({ unit: 'binary' }), fc.constantFrom('a"b\\c', 'line\nbreak', '\ud800', 'naïve ✓'))
  const number = fc.oneof(fc.integer(), fc.double({ noNaN: true }), fc.constantFrom(0, -0, 1e21, 2 ** 53 + 2, Number.POSITIVE_INFINITY))
  const limited = fc.record({
    ruleId: name,
    allowed: fc.boolean(),
    wouldDeny: fc.boolean(),
    shadow: fc.option(fc.boolean(), { nil: undefined }),
    decision: fc.record({
      policy: name,
      limit: number,
      remaining: number,
      resetMs: number,
      retryAfterMs: number,
      source: name,
      never: fc.option(fc.constant(true), { nil: undefined }),
    }),
  })
  const outcome: fc.Arbitrary<DescriptorOutcome> = fc.oneof(
    fc.constant({ kind: 'unmatched' as const }),
    fc.record({ kind: fc.constant('unmatched' as const), replaced: name }),
    fc.record({ kind: fc.constant('unlimited' as const), ruleId: name }),
    limited.map(({ ruleId, allowed, wouldDeny, shadow, decision }) => ({
      kind: 'limited' as const,
      ruleId,
      rule: shadow === undefined ? undefined : ({ shadow } as MatchedRule),
      allowed,
      wouldDeny,
      near: false,
      policy: {} as Policy,
      decision: decision as unknown as Decision,
    })),
  )

  it('serializes every answer toCheckResponse makes to exactly the text JSON.stringify gives', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(outcome, { minLength: 1, maxLength: 4 }), fc.boolean(), async (outcomes, allowed) => {
        const response = toCheckResponse({ allowed, outcomes } satisfies DecideResult)
        next = { status: allowed ? 200 : 429, body: response }
        const reply = await app.inject({ method: 'POST', url: '/', payload: {} })
        assert.equal(reply.statusCode, next.status)
        assert.equal(reply.body, JSON.stringify(response))
      }),
      { numRuns: 300 },
    )
  })
})
