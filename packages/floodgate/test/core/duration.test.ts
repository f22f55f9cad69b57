// Tests of duration parsing and formatting: every unit, exact decimals, and errors that name the field.

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import { formatDuration, parseDuration } from '../../src/core/duration.js'
import { FloodgateError } from '../../src/core/errors.js'

/** Asserts that parsing throws INVALID_DURATION with a message starting with the field name. */
function assertRejected(value: unknown, pattern: RegExp): void {
  assert.throws(
    () => parseDuration(value, 'rules[0].period'),
    (error: unknown) => {
      assert.ok(error instanceof FloodgateError)
      assert.equal(error.code, 'INVALID_DURATION')
      assert.match(error.message, /^rules\[0\]\.period: /)
      assert.match(error.message, pattern)
      return true
    },
  )
}

describe('parseDuration', () => {
  it('takes a number as milliseconds', () => {
    assert.equal(parseDuration(1), 1)
    assert.equal(parseDuration(1_500), 1_500)
  })

  it('reads every unit', () => {
    assert.equal(parseDuration('500ms'), 500)
    assert.equal(parseDuration('30s'), 30_000)
    assert.equal(parseDuration('1m'), 60_000)
    assert.equal(parseDuration('2h'), 7_200_000)
    assert.equal(parseDuration('1d'), 86_400_000)
    assert.equal(parseDuration('1w'), 604_800_000)
  })

  it('allows spaces around the number and the unit', () => {
    assert.equal(parseDuration(' 2 s '), 2_000)
  })

  it('reads decimals exactly, whatever binary floating point makes of them', () => {
    assert.equal(parseDuration('1.5s'), 1_500)
    assert.equal(parseDuration('0.07s'), 70)
    assert.equal(parseDuration('1.005s'), 1_005)
    assert.equal(parseDuration('0.001s'), 1)
    assert.equal(parseDuration('1.50m'), 90_000)
  })

  it('reads any decimal of any unit exactly: whole milliseconds pass, the rest are rejected', () => {
    const units = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 }
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 10 ** 9 }),
        fc.integer({ min: 0, max: 5 }),
        fc.constantFrom(...Object.entries(units)),
        (digits, places, [unit, size]) => {
          const padded = String(digits).padStart(places + 1, '0')
          const text = places === 0 ? `${padded}${unit}` : `${padded.slice(0, -places)}.${padded.slice(-places)}${unit}`
          // The exact value in BigInt: digits × size / 10^places.
          const scaled = BigInt(digits) * BigInt(size)
          const divisor = 10n ** BigInt(places)
          if (scaled % divisor !== 0n) assert.throws(() => parseDuration(text), /whole number of milliseconds/, text)
          else if (scaled / divisor > BigInt(Number.MAX_SAFE_INTEGER)) assert.throws(() => parseDuration(text), /at most/, text)
          else assert.equal(parseDuration(text), Number(scaled / divisor), text)
        },
      ),
      { numRuns: 1_000 },
    )
  })

  it('rejects what is not a whole number of milliseconds, and says so', () => {
    assertRejected('1.5ms', /whole number of milliseconds/)
    assertRejected('0.0001s', /whole number of milliseconds/)
    assertRejected(2.5, /whole number of milliseconds/)
  })

  it('rejects zero and negative durations', () => {
    assertRejected(0, /greater than 0/)
    assertRejected('0s', /greater than 0/)
    assertRejected(-5, /greater than 0/)
    assertRejected('-1s', /is not a duration/)
  })

  it('rejects text that is not a duration, naming the units it knows', () => {
    for (const text of ['', 's', '10', '1x', '1 sec', '1e3ms', 'ten seconds', '1.s', '.5s']) {
      assertRejected(text, /is not a duration.*"500ms", "30s", "1m", "1h", "1d", "1w"/)
    }
  })

  it('rejects values of other types, and numbers that are not finite', () => {
    for (const value of [null, undefined, true, {}, [], '1s'.split('')]) assertRejected(value, /expected a duration/)
    for (const value of [Number.NaN, Number.POSITIVE_INFINITY]) assertRejected(value, /greater than 0/)
  })

  it('rejects durations too long to count in whole milliseconds exactly', () => {
    assertRejected('99999999999999999999w', /at most/)
    assertRejected(2 ** 53, /at most/)
    assert.equal(parseDuration(Number.MAX_SAFE_INTEGER), Number.MAX_SAFE_INTEGER)
  })

  it('names the field "duration" when none is given', () => {
    assert.throws(() => parseDuration('soon'), /^FloodgateError: duration: /)
  })
})

describe('formatDuration', () => {
  it('writes the largest unit that divides exactly', () => {
    assert.equal(formatDuration(604_800_000), '1w')
    assert.equal(formatDuration(172_800_000), '2d')
    assert.equal(formatDuration(3_600_000), '1h')
    assert.equal(formatDuration(60_000), '1m')
    assert.equal(formatDuration(90_000), '90s')
    assert.equal(formatDuration(1_500), '1500ms')
    assert.equal(formatDuration(1), '1ms')
  })

  it('round-trips through parseDuration', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.integer({ min: 1, max: 10_000_000 }),
          fc.integer({ min: 1, max: 1_000 }).map((n) => n * 60_000),
        ),
        (ms) => {
          assert.equal(parseDuration(formatDuration(ms)), ms)
        },
      ),
      { numRuns: 500 },
    )
  })
})
