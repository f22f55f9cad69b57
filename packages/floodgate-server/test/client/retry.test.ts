// withRetry against real HTTP servers and the service, on a manual timer: what it waits, when it
// gives up at once (a Retry-After past maxWaitMs), and that an AbortSignal ends a wait.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { createServer, type Server } from 'node:http'
import { FloodgateClient, RetryAfterTooLongError, type RetryTimers, parseRetryAfter, withRetry } from 'floodgate/client'
import { backoffMs } from '../../../floodgate/src/client/retry.js'
import { startTestService, type TestService } from '../service/helpers.js'

function listen(handler: Parameters<typeof createServer>[1]): Promise<{ server: Server; url: string }> {
  const server = createServer(handler)
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve({ server, url: `http://127.0.0.1:${(server.address() as { port: number }).port}` })),
  )
}

/** A timer that only records what it was asked: `fire()` runs the pending callback, `waits` lists every ms asked. */
function manualTimers() {
  const waits: number[] = []
  const cleared: number[] = []
  let pending: { id: number; callback: () => void } | undefined
  let nextId = 0
  let onSchedule: (() => void) | undefined
  const timers: RetryTimers = {
    setTimeout(callback, ms) {
      waits.push(ms)
      pending = { id: ++nextId, callback }
      onSchedule?.()
      return pending.id
    },
    clearTimeout(handle) {
      cleared.push(handle as number)
      if (pending?.id === handle) pending = undefined
    },
  }
  return {
    timers,
    waits,
    cleared,
    /** Resolves once a wait is scheduled (at once when one is pending). */
    scheduled: () => new Promise<void>((resolve) => (pending ? resolve() : (onSchedule = resolve))),
    fire() {
      const callback = pending?.callback
      pending = undefined
      callback?.()
    },
  }
}

/** A server answering 429 with `retryAfter` to the first `limited` calls, then 200. */
async function limitedServer(retryAfter: string, limited = 1) {
  let calls = 0
  const { server, url } = await listen((_req, res) => {
    calls++
    if (calls <= limited) res.writeHead(429, { 'retry-after': retryAfter }).end('slow down')
    else res.writeHead(200).end('ok')
  })
  return { server, url, calls: () => calls }
}

describe('withRetry waits', () => {
  it('waits exactly the Retry-After header (no jitter at random 0), then returns the answer that passed', async () => {
    const { server, url, calls } = await limitedServer('1')
    const clock = manualTimers()
    try {
      const pending = withRetry(() => fetch(url), { retries: 2, random: () => 0, timers: clock.timers })
      await clock.scheduled()
      assert.equal(calls(), 1, 'no second call before the wait ends')
      clock.fire()
      const response = await pending
      assert.equal(response.status, 200)
      assert.equal(calls(), 2)
      assert.deepEqual(clock.waits, [1000])
    } finally {
      server.close()
    }
  })

  it('keeps Retry-After plus jitter within maxWaitMs, never below Retry-After', async () => {
    const { server, url } = await limitedServer('1', 2)
    const clock = manualTimers()
    try {
      const pending = withRetry(() => fetch(url), {
        retries: 3,
        baseMs: 5_000,
        maxMs: 5_000,
        maxWaitMs: 1_500,
        random: () => 0.999,
        timers: clock.timers,
      })
      for (let i = 0; i < 2; i++) {
        await clock.scheduled()
        clock.fire()
      }
      assert.equal((await pending).status, 200)
      assert.deepEqual(clock.waits, [1_500, 1_500])
    } finally {
      server.close()
    }
  })
})

describe('withRetry gives up at once past maxWaitMs', () => {
  it('a per-day Retry-After (80238 s) throws RetryAfterTooLongError with the 429 response, without waiting', async () => {
    const { server, url, calls } = await limitedServer('80238')
    const clock = manualTimers()
    try {
      // maxMs caps only the backoff: before maxWaitMs this call slept 22 hours.
      const error = await withRetry(() => fetch(url), { maxMs: 100, timers: clock.timers }).then(
        () => assert.fail('resolved'),
        (thrown: unknown) => thrown,
      )
      assert.ok(error instanceof RetryAfterTooLongError, String(error))
      assert.equal(error.code, 'RETRY_AFTER_TOO_LONG')
      assert.equal(error.retryAfterMs, 80_238_000)
      assert.equal(error.maxWaitMs, 60_000)
      assert.equal(error.calls, 1)
      assert.equal((error.result as Response).status, 429)
      assert.equal(await (error.result as Response).text(), 'slow down', 'the answer is still readable')
      assert.match(error.message, /retry after 80238000 ms, more than maxWaitMs \(60000 ms\)/)
      assert.deepEqual(clock.waits, [], 'no wait was scheduled')
      assert.equal(calls(), 1)
    } finally {
      server.close()
    }
  })

  it('a thrown 429 past the cap becomes the cause', async () => {
    const limited = Object.assign(new Error('limited'), { status: 429, retryAfterMs: 5_000 })
    const error = await withRetry(
      async () => {
        throw limited
      },
      { maxWaitMs: 1_000, timers: manualTimers().timers },
    ).catch((thrown: unknown) => thrown)
    assert.ok(error instanceof RetryAfterTooLongError)
    assert.equal(error.cause, limited)
    assert.equal(error.result, undefined)
  })

  describe('against the service', () => {
    let service: TestService
    before(async () => {
      service = await startTestService()
    })
    after(async () => {
      await service.stop()
    })

    it('a denied check of a per-day rule throws with the decision instead of sleeping until tomorrow', async () => {
      const client = new FloodgateClient({ url: service.httpUrl, timeout: '2s' })
      const request = { domain: 'test', descriptors: [[{ key: 'user', value: 'retry-day' }]] }
      for (let i = 0; i < 3; i++) assert.equal((await client.check(request)).allowed, true)
      const clock = manualTimers()
      const error = await withRetry(() => client.check(request), { maxMs: 100, maxWaitMs: 30_000, timers: clock.timers }).catch(
        (thrown: unknown) => thrown,
      )
      assert.ok(error instanceof RetryAfterTooLongError, String(error))
      const decision = error.result as Awaited<ReturnType<typeof client.check>>
      assert.equal(decision.allowed, false)
      assert.equal(error.retryAfterMs, decision.retryAfterMs)
      assert.ok(error.retryAfterMs > 30_000)
      assert.deepEqual(clock.waits, [])
      client.close()
    })
  })
})

describe('withRetry with an AbortSignal', () => {
  it('an abort during a wait rejects with the reason at once, clears the timer and calls no more', async () => {
    const { server, url, calls } = await limitedServer('30')
    const clock = manualTimers()
    const controller = new AbortController()
    try {
      const pending = withRetry(() => fetch(url), { signal: controller.signal, timers: clock.timers })
      await clock.scheduled()
      controller.abort(new Error('shutting down'))
      await assert.rejects(pending, /shutting down/)
      assert.equal(clock.cleared.length, 1)
      clock.fire()
      assert.equal(calls(), 1)
    } finally {
      server.close()
    }
  })

  it('an already aborted signal makes no call', async () => {
    let calls = 0
    await assert.rejects(
      withRetry(
        async () => {
          calls++
          return 'x'
        },
        { signal: AbortSignal.abort() },
      ),
      { name: 'AbortError' },
    )
    assert.equal(calls, 0)
  })
})

describe('withRetry basics', () => {
  it('retries thrown 429 errors, rethrows other errors at once, and returns the last answer when retries run out', async () => {
    let thrown = 0
    const value = await withRetry(
      async () => {
        if (thrown++ < 2) throw Object.assign(new Error('limited'), { status: 429, retryAfterMs: 5 })
        return 'done'
      },
      { retries: 3, baseMs: 1 },
    )
    assert.equal(value, 'done')
    assert.equal(thrown, 3)

    let other = 0
    await assert.rejects(
      withRetry(async () => {
        other++
        throw new Error('boom')
      }),
      /boom/,
    )
    assert.equal(other, 1)

    let limitedCalls = 0
    const last = await withRetry(async () => ({ allowed: false, retryAfterMs: 1, results: [], n: ++limitedCalls }), {
      retries: 2,
      baseMs: 1,
    })
    assert.equal(last.n, 3)
  })

  it('rejects a maxWaitMs that is not a number of milliseconds', async () => {
    await assert.rejects(
      withRetry(async () => 1, { maxWaitMs: Number.NaN }),
      /maxWaitMs: expected/,
    )
  })

  it('draws full jitter uniformly below base·2^attempt, capped at maxMs', () => {
    assert.equal(
      backoffMs(0, 100, 10_000, () => 0.5),
      50,
    )
    assert.equal(
      backoffMs(3, 100, 10_000, () => 0.5),
      400,
    )
    assert.equal(
      backoffMs(10, 100, 1_000, () => 0.999),
      999,
    )
    assert.equal(
      backoffMs(5, 100, 10_000, () => 0),
      0,
    )
  })

  it('parses Retry-After as seconds or an HTTP date', () => {
    assert.equal(parseRetryAfter('3'), 3000)
    assert.equal(parseRetryAfter(new Date(10_000).toUTCString(), 4_000), 6000)
    assert.equal(parseRetryAfter('soon'), 0)
    assert.equal(parseRetryAfter(undefined), 0)
  })
})
