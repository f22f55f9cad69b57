// Each algorithm is defined once (src/core/algorithms/<name>.ts); its Redis Lua twin is generated
// by scripts/gen-algorithms.mjs and committed. These hold the committed twins to the generator and
// the generator to its subset. That the twins decide like their definitions is the equivalence
// property tests' part (test/stores/redis/equivalence.test.ts and each algorithm's itMatchesLuaTwin).

import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { pathToFileURL } from 'node:url'
import { promisify } from 'node:util'
import ts from 'typescript'

const run = promisify(execFile)
/** The checkout (not the test runner's compiled copy of it). */
const ROOT = process.env.FLOODGATE_REPOSITORY ?? join(import.meta.dirname, '../../../../..')
const GENERATOR = join(ROOT, 'scripts/gen-algorithms.mjs')

interface Generator {
  generate(): Map<string, string>
  emitLua(definition: { file: string; path: string; source: ts.SourceFile }, objects: Map<string, string>): string
}

const generator = (): Promise<Generator> => import(pathToFileURL(GENERATOR).href)

/** Emits the Lua of a definition given as text. */
async function emit(text: string): Promise<string> {
  const { emitLua } = await generator()
  const path = join(ROOT, 'packages/floodgate/src/core/algorithms/probe.ts')
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true)
  return emitLua({ file: 'probe.ts', path, source }, new Map())
}

const definition = (body: string) => `
import type { Algorithm } from './types.js'
export const probe: Algorithm = {
  name: 'probe',
  step(state, now, cost, policy, out) {
${body}
  },
  ttlMs(state, now, policy) {
    return 1
  },
}
`

describe('generated algorithm twins', () => {
  it('the committed Lua twins are what the generator makes of the definitions today', async () => {
    const { generate } = await generator()
    const made = generate()
    assert.ok(made.size >= 7, `every algorithm has a twin (${made.size})`)
    const stale = [...made].filter(([path, text]) => readFileSync(path, 'utf8') !== text).map(([path]) => path)
    assert.deepEqual(stale, [], 'stale: run node scripts/gen-algorithms.mjs and commit the .lua files')
  })

  it('--check exits 0 on an up-to-date tree', async () => {
    await run(process.execPath, [GENERATOR, '--check'], { cwd: ROOT })
  })

  it('indexes become 1-based and lengths #, folded into the constant term', async () => {
    const lua = await emit(
      definition(`
    const s = state!
    const a = s[s.length - 2] + s[0] + s[cost]
    for (let i = 0; i < s.length; i += 2) s[i] = a
    s.length = 2
    return out!`),
    )
    assert.match(lua, /local a = s\[#s - 1\] \+ s\[1\] \+ s\[cost \+ 1\]/)
    assert.match(lua, /for i = 0, #s - 1, 2 do\n\s+s\[i \+ 1\] = a\n\s+end/)
    assert.match(lua, /for i = 3, #s do s\[i\] = nil end/)
  })

  it('keeps JavaScript grouping where Lua precedence differs (== and < are one level in Lua)', async () => {
    const lua = await emit(
      definition(`
    const same = now === cost < 3
    const minus = now - (cost - 1)
    return out!`),
    )
    assert.match(lua, /local same = now == \(cost < 3\)/)
    assert.match(lua, /local minus = now - \(cost - 1\)/)
  })

  for (const [what, body, reason] of [
    ['%, which is floored in Lua and truncated in JavaScript', 'const r = now % 7', 'the operator %'],
    ['a call of an unknown function', 'const r = Date.now()', 'a call of Date.now'],
    ['a for loop whose counter the body changes', 'for (let i = 0; i < 3; i++) { i = i + 1 }', 'the for counter i assigned'],
    ['Math beyond floor, ceil, max and min', 'const r = Math.round(now)', 'Math.round'],
    ['a ?: whose true branch is false (Lua’s and/or would pick the other)', 'const r = now > 1 ? false : true', 'true branch is false'],
  ]) {
    it(`refuses ${what}, naming the line`, async () => {
      await assert.rejects(emit(definition(`    ${body}\n    return out!`)), (error: Error) => {
        assert.match(error.message, /^probe\.ts:6: .*outside the algorithm subset/)
        assert.ok(error.message.includes(reason), error.message)
        return true
      })
    })
  }
})

interface KernelEmitter {
  emitKernel(
    definition: { file: string; path: string; source: ts.SourceFile },
    objects: Map<string, string>,
    files: Map<string, string>,
    wordsOf: (name: string) => number,
    packageDirectory: string,
  ): { words: number; text: string }
  whyNoKernel(definition: { source: ts.SourceFile }): string | undefined
}

/** Emits the memory-store kernel of a definition given as text (scripts/algorithms/ts-kernel.mjs). */
async function emitKernel(text: string): Promise<{ words: number; text: string }> {
  const emitter: KernelEmitter = await import(pathToFileURL(join(ROOT, 'scripts/algorithms/ts-kernel.mjs')).href)
  const path = join(ROOT, 'packages/floodgate/src/core/algorithms/probe.ts')
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true)
  const definition = { file: 'probe.ts', path, source }
  if (emitter.whyNoKernel(definition) !== undefined) throw new Error(`no kernel: ${emitter.whyNoKernel(definition)}`)
  return emitter.emitKernel(definition, new Map([['probe', 'probe']]), new Map(), () => 2, join(ROOT, 'packages/floodgate'))
}

const typedDefinition = (body: string) => `
import type { Policy } from '../policy.js'
import { writeState, writeStep, type Algorithm, type State, type StepResult } from './types.js'
export const probe: Algorithm = {
  name: 'probe',
  step(state: State | undefined, now: number, cost: number, policy: Policy, out?: StepResult): StepResult {
${body}
  },
  ttlMs(state: State, now: number, policy: Policy): number {
    return 1
  },
}
`

describe('generated one-policy kernels', () => {
  it('the committed kernels are among the generated files', async () => {
    const { generate } = await generator()
    const kernels = [...generate().keys()].filter((path) => path.includes('/stores/memory/kernels/'))
    assert.equal(kernels.length, 6, kernels.join(', '))
  })

  it('reads the state from the record words and writes the new state to the result fields', async () => {
    const { text, words } = await emitKernel(
      typedDefinition(`
    let a = 0
    if (state !== undefined) a = state[0] + state[1]
    const result = writeStep(out, true, a, 0, 0, 0)
    writeState(result.state, a, now)
    return result`),
    )
    assert.equal(words, 2)
    assert.match(text, /if \(live\)\s*a = f64\[s\] \+ f64\[s \+ 1\]/)
    assert.match(text, /result\.n0 = a;?\n\s+result\.n1 = now/)
    assert.match(text, /export function probeDecide\(f64: Float64Array, base: number/)
  })

  for (const [what, body, reason] of [
    ['a state used as an array', 'const copy = state!.slice()', 'the state used other than'],
    ['a new state read at a computed index', 'const r = out!.state[cost]', 'not a constant'],
    ['a state that grows (its length read)', 'const n = state!.length', 'no kernel: it reads state.length'],
  ]) {
    it(`refuses ${what}`, async () => {
      await assert.rejects(emitKernel(typedDefinition(`    ${body}\n    return out!`)), (error: Error) => {
        assert.ok(error.message.includes(reason), error.message)
        return true
      })
    })
  }
})
