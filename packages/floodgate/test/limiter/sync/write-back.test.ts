// Write-back sync against a model: N instances deciding one key from local copies over one shared
// store, with flushes that pass, fail, lose their answer after applying, or hang. Every unit admitted
// reaches the store exactly once, and the fleet admits no more than the documented bound.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import { MemoryStore } from '../../../src/stores/memory/memory-store.js'
import { WriteBack, type WriteBackResponse } from '../../../src/limiter/sync/write-back.js'
import { createPolicies, type Policy } from '../../../src/core/policy.js'
import { FloodgateError } from '../../../src/core/errors.js'
import { FlakyStore, SimTime, settle, type CallMode } from './support.js'

const START = 1_700_000_000_000 // a whole hour: the tests' window starts here
const KEY = 'hot'

interface Fleet {
  time: SimTime
  store: MemoryStore
  links: FlakyStore[]
  instances: WriteBack[]
}

function fleet(count: number, options: { instances?: number; maxKeys?: number } = {}): Fleet {
  const time = new SimTime(START)
  const store = new MemoryStore({ clock: time.clock })
  const links = Array.from({ length: count }, () => new FlakyStore(store))
  const instances = links.map(
    (link, i) =>
      new WriteBack({
        store: link,
        clock: time.clock,
        timers: time,
        origin: `i${i}`,
        instances: options.instances ?? count,
        maxKeys: options.maxKeys,
      }),
  )
  return { time, store, links, instances }
}

/** Decides and waits for the answer (a cold key's first decision waits for the store). */
async function decide(
  writeBack: WriteBack,
  policies: readonly Policy[],
  cost: number,
  key = KEY,
  time?: SimTime,
): Promise<WriteBackResponse> {
  let answer: WriteBackResponse | undefined
  let failure: unknown
  writeBack.decide(key, policies, cost, (error, response) => {
    failure = error
    answer = response
  })
  for (let i = 0; i < 5 && answer === undefined && failure === undefined; i++) await settle()
  // A hung store: the read's timeout answers from a fresh copy.
  if (answer === undefined && failure === undefined && time !== undefined) time.advance(100)
  for (let i = 0; i < 5 && answer === undefined && failure === undefined; i++) await settle()
  if (failure !== undefined && failure !== null) throw failure
  assert.ok(answer !== undefined, 'no answer')
  return answer
}

/** The count the store holds for the key's fixed window. */
function storedCount(store: MemoryStore, policies: readonly Policy[], key = KEY): number {
  return store.mergeOne({ key, policies, units: 0 }).records[0].state?.[1] ?? 0
}

async function drain(f: Fleet): Promise<void> {
  for (const link of f.links) link.mode = 'ok'
  f.time.advance(1_000) // every hung call times out
  for (let round = 0; round < 3; round++) {
    await Promise.all(f.instances.map((instance) => instance.flush()))
    await settle()
  }
}

const stepArbitrary = fc.oneof(
  {
    weight: 8,
    arbitrary: fc.record({
      kind: fc.constant('decide' as const),
      at: fc.nat(3),
      cost: fc.integer({ min: 1, max: 3 }),
      times: fc.integer({ min: 1, max: 12 }),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('flush' as const),
      at: fc.nat(3),
      mode: fc.constantFrom<CallMode>('ok', 'ok', 'ok', 'fail', 'lost', 'hang'),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 1, max: 150 }) }) },
)

describe('write-back sync', () => {
  it('counts every admitted unit in the store exactly once, and admits at most the bound', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1, max: 40 }),
        fc.array(stepArbitrary, { minLength: 1, maxLength: 80 }),
        async (count, limit, steps) => {
          const policies = createPolicies([{ algorithm: 'fixed-window', limit, period: '1h', sync: 'write-back', flushMs: 50 }])
          const f = fleet(count)
          let admitted = 0
          const lastView = new Map<number, number>() // per instance: the synced count its last admission was checked against
          for (const step of steps) {
            if (step.kind === 'advance') {
              f.time.advance(step.ms)
              await settle()
              continue
            }
            const i = step.at % count
            if (step.kind === 'flush') {
              f.links[i].mode = step.mode
              // Not awaited: a hung call settles only when its timeout fires (an 'advance' step).
              void f.instances[i].flush()
              await settle()
              continue
            }
            for (let n = 0; n < step.times; n++) {
              // What the instance decides from: the answer it took (not the link's last delivered one,
              // which may be an answer that came after its call had timed out, and was dropped).
              const view = f.instances[i].synced(KEY, policies)?.[0].state?.[1] ?? 0
              const decision = await decide(f.instances[i], policies, step.cost, KEY, f.time)
              if (!decision.allowed) continue
              admitted += step.cost
              lastView.set(i, view)
              // The bound (docs/sync.md): limit + N × the largest cost + Σ over instances of what the
              // store took after the answer they last decided from, divided by N.
              const merged = storedCount(f.store, policies)
              let unknown = 0
              for (const seen of lastView.values()) unknown += Math.max(0, merged - seen)
              const bound = limit + count * 3 + unknown / count
              assert.ok(admitted <= bound, `admitted ${admitted} > bound ${bound} (limit ${limit}, ${count} instances, store ${merged})`)
              // The bound in terms known in advance, whatever the timing (docs/sync.md): L·(2N − 1)/N + N·c.
              const known = (limit * (2 * count - 1)) / count + count * 3
              assert.ok(admitted <= known, `admitted ${admitted} > ${known} (limit ${limit}, ${count} instances)`)
            }
          }
          await drain(f)
          for (const instance of f.instances) assert.equal(instance.unsynced, 0)
          assert.equal(storedCount(f.store, policies), admitted, 'the store holds every admitted unit once')
        },
      ),
      { numRuns: 300 },
    )
  })

  it('the share rule: four instances that never hear of each other admit the limit between them, not four times it', async () => {
    const policies = createPolicies([{ algorithm: 'fixed-window', limit: 20, period: '1h', sync: 'write-back' }])
    const f = fleet(4)
    let admitted = 0
    for (const [n, instance] of f.instances.entries()) {
      // Each reads the empty key, then loses the store: a spent share cannot ask it for the next.
      if ((await decide(instance, policies, 1)).allowed) admitted++
      f.links[n].mode = 'fail'
      for (let i = 1; i < 20; i++) if ((await decide(instance, policies, 1)).allowed) admitted++
    }
    assert.equal(admitted, 20)
    for (const link of f.links) link.mode = 'ok'
    const denied = await decide(f.instances[0], policies, 1)
    assert.equal(denied.allowed, false)
    assert.equal(denied.results[0].retryAfterMs, 50) // the next flush brings the next share
    // Once they sync (a second round: the first answers saw only the flushes before them), each takes
    // its share of what is left: nothing is, so all deny.
    for (let round = 0; round < 2; round++) {
      // The last one's spent share asked for a refresh (a read going out on the next turn) before the
      // store came back: the read carries its units.
      await settle()
      for (const instance of f.instances) instance.decide(KEY, policies, 0, () => {})
      await Promise.all(f.instances.map((instance) => instance.flush()))
    }
    assert.equal(storedCount(f.store, policies), 20)
    for (const instance of f.instances) assert.equal((await decide(instance, policies, 1)).allowed, false)
  })

  it('a key not held decides from a fresh copy while its read is under way, at most its provisional units', async () => {
    // 200 per second with flushMs 50 and 2 instances: 200 / 1000 × 50 / 2 = 5 provisional units.
    const policies = createPolicies([{ algorithm: 'gcra', limit: 200, period: '1s', sync: 'write-back', flushMs: 50 }])
    const f = fleet(2)
    // The other instance already spent the key in the store.
    f.store.mergeOne({ key: KEY, policies, units: 200 })
    const answers: boolean[] = []
    for (let i = 0; i < 8; i++) f.instances[0].decide(KEY, policies, 1, (_, response) => answers.push(response!.allowed))
    // Five answered at once, from the fresh copy; the rest wait for the read.
    assert.deepEqual(answers, [true, true, true, true, true])
    await settle()
    await settle()
    // The read brought the spent state: those who waited are denied, and so is the next.
    assert.deepEqual(answers, [true, true, true, true, true, false, false, false])
    assert.equal((await decide(f.instances[0], policies, 1)).allowed, false)
    // A key spent nowhere: the same five at once, the rest after the read, all admitted.
    const fresh: boolean[] = []
    for (let i = 0; i < 8; i++) f.instances[1].decide('other', policies, 1, (_, response) => fresh.push(response!.allowed))
    assert.equal(fresh.length, 5)
    await settle()
    await settle()
    assert.deepEqual(fresh, Array(8).fill(true))
    // A key whose refill in one flush interval is under one unit waits for its read (no provisional units).
    const slow = createPolicies([{ algorithm: 'fixed-window', limit: 10, period: '1h', sync: 'write-back', flushMs: 50 }])
    let answered = false
    f.instances[0].decide('slow', slow, 1, () => {
      answered = true
    })
    assert.equal(answered, false)
    await settle()
    assert.equal(answered, true)
  })

  it('a flush whose answer was lost is sent again with the same seq and counts once', async () => {
    const policies = createPolicies([{ algorithm: 'gcra', limit: 100, period: '1s', sync: 'write-back' }])
    const f = fleet(1)
    await decide(f.instances[0], policies, 1)
    for (let i = 0; i < 9; i++) await decide(f.instances[0], policies, 1)
    f.links[0].mode = 'lost'
    await f.instances[0].flush()
    assert.equal(f.instances[0].unsynced, 10)
    await decide(f.instances[0], policies, 1)
    f.links[0].mode = 'ok'
    await f.instances[0].flush() // the lost batch again: skipped by the store, answered with the state
    await f.instances[0].flush() // the unit admitted meanwhile
    assert.equal(f.instances[0].stats.replays, 1)
    assert.equal(f.instances[0].unsynced, 0)
    const stored = f.store.evaluateOne(KEY, policies, 0)
    assert.equal(stored.results[0].remaining, 100 - 11)
  })

  it("stats.oldestAnswerMs: the age of the oldest answer an admission was decided from (the bound's precondition)", async () => {
    const policies = createPolicies([{ algorithm: 'fixed-window', limit: 100, period: '1h', sync: 'write-back', flushMs: 100 }])
    const f = fleet(1)
    await decide(f.instances[0], policies, 1) // the first answer is the read's: decided at once, age 0
    assert.equal(f.instances[0].stats.oldestAnswerMs, 0)
    f.links[0].mode = 'fail' // no answer replaces it: the copy ages
    f.time.advance(70)
    await decide(f.instances[0], policies, 1)
    await decide(f.instances[0], policies, 0) // a peek admits nothing
    assert.equal(f.instances[0].stats.oldestAnswerMs, 70)
    f.time.advance(60)
    await decide(f.instances[0], policies, 1)
    assert.equal(f.instances[0].stats.oldestAnswerMs, 130)
  })

  it('keeps deciding locally while the store is down, and flushes when it returns', async () => {
    const policies = createPolicies([{ algorithm: 'fixed-window', limit: 10, period: '1h', sync: 'write-back' }])
    const f = fleet(1)
    f.links[0].mode = 'fail'
    const answers = []
    for (let i = 0; i < 12; i++) answers.push(await decide(f.instances[0], policies, 1))
    assert.deepEqual(
      answers.map((answer) => answer.allowed),
      [...Array(10).fill(true), false, false],
    )
    assert.ok(answers.every((answer) => answer.source === 'write-back'))
    await f.instances[0].flush()
    assert.equal(storedCount(f.store, policies), 0)
    f.links[0].mode = 'ok'
    await f.instances[0].flush()
    assert.equal(storedCount(f.store, policies), 10)
  })

  it('a hung store call times out: decisions go on, and the units go again', async () => {
    const policies = createPolicies([{ algorithm: 'fixed-window', limit: 10, period: '1h', sync: 'write-back' }])
    const f = fleet(1)
    f.links[0].mode = 'hang'
    const first = new Promise<boolean>((resolve) => f.instances[0].decide(KEY, policies, 1, (_, response) => resolve(response!.allowed)))
    await settle() // the read goes at the end of the turn
    f.time.advance(100) // the key's first read times out: decided from a fresh copy
    assert.equal(await first, true)
    const flushing = f.instances[0].flush()
    f.time.advance(100)
    await flushing
    f.links[0].mode = 'ok'
    await f.instances[0].flush()
    assert.equal(storedCount(f.store, policies), 1)
  })

  it('holds at most maxKeys keys: a clean one makes room, and with none clean a new key is refused', async () => {
    const policies = createPolicies([{ algorithm: 'fixed-window', limit: 10, period: '1h', sync: 'write-back' }])
    const f = fleet(1, { maxKeys: 2 })
    await decide(f.instances[0], policies, 1, 'a')
    await f.instances[0].flush()
    await decide(f.instances[0], policies, 1, 'b')
    await decide(f.instances[0], policies, 1, 'c') // a is clean: replaced
    assert.equal(f.instances[0].size, 2)
    const full = (error: unknown) => error instanceof FloodgateError && error.code === 'WRITE_BACK_FULL'
    await assert.rejects(decide(f.instances[0], policies, 1, 'd'), full)
    await f.instances[0].flush()
    await decide(f.instances[0], policies, 1, 'd')
  })

  it('a flush called outside the timer moves the next timed flush one interval after it', async () => {
    const policies = createPolicies([{ algorithm: 'gcra', limit: 1000, period: '1s', sync: 'write-back', flushMs: 50 }])
    const f = fleet(1)
    await decide(f.instances[0], policies, 1)
    await settle() // the key's read
    await decide(f.instances[0], policies, 1) // a unit: the timer is armed for 50 ms from here
    const calls = f.links[0].calls
    f.time.advance(30)
    await f.instances[0].flush()
    assert.equal(f.links[0].calls, calls + 1)
    await decide(f.instances[0], policies, 1)
    // The old tick's time passes: everything it would have sent went 20 ms ago, but for one unit.
    f.time.advance(25)
    await settle()
    assert.equal(f.links[0].calls, calls + 1)
    // One interval after the manual flush, the unit goes.
    f.time.advance(30)
    await settle()
    assert.equal(f.links[0].calls, calls + 2)
    assert.equal(f.instances[0].unsynced, 0)
  })

  it('close() flushes what is held', async () => {
    const policies = createPolicies([{ algorithm: 'token-bucket', limit: 10, period: '1s', sync: 'write-back' }])
    const f = fleet(1)
    for (let i = 0; i < 4; i++) await decide(f.instances[0], policies, 1)
    await f.instances[0].close()
    assert.equal(f.store.evaluateOne(KEY, policies, 0).results[0].remaining, 6)
    await assert.rejects(decide(f.instances[0], policies, 1), /closed/)
  })
})
