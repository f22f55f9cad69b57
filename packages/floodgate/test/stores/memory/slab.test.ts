// Slab: blocks keep their words across growth, a freed block goes to the next block of its size
// only, and two live blocks never overlap.

import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import { Slab } from '../../../src/stores/memory/slab.js'

describe('Slab', () => {
  it('keeps every live block whole and apart across allocations, frees and growth', () => {
    const op = fc.oneof(fc.record({ alloc: fc.integer({ min: 1, max: 9 }) }), fc.record({ free: fc.nat(50) }))
    fc.assert(
      fc.property(fc.array(op, { maxLength: 300 }), (ops) => {
        const slab = new Slab(16)
        const live: { at: number; words: number; mark: number }[] = []
        let marks = 0
        for (const step of ops) {
          if ('alloc' in step) {
            const at = slab.alloc(step.alloc)
            const mark = ++marks
            for (let k = 0; k < step.alloc; k++) slab.f64[at + k] = mark
            live.push({ at, words: step.alloc, mark })
          } else if (live.length > 0) {
            const [block] = live.splice(step.free % live.length, 1)
            slab.release(block.at, block.words)
          }
          for (const block of live) {
            for (let k = 0; k < block.words; k++) assert.equal(slab.f64[block.at + k], block.mark)
          }
        }
      }),
      { numRuns: 200 },
    )
  })

  it('gives a freed block to the next block of the same size', () => {
    const slab = new Slab(16)
    const a = slab.alloc(4)
    slab.alloc(4)
    slab.release(a, 4)
    assert.notEqual(slab.alloc(3), a)
    assert.equal(slab.alloc(4), a)
  })

  it('views the same memory as 32-bit halves', () => {
    const slab = new Slab(4)
    const at = slab.alloc(2)
    slab.u32[2 * at] = 7
    slab.u32[2 * at + 1] = 9
    slab.alloc(4000)
    assert.deepEqual([slab.u32[2 * at], slab.u32[2 * at + 1]], [7, 9])
  })
})
