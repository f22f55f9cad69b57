// `node scripts/gen-algorithms.mjs [--check]`: each algorithm is defined once, as its TypeScript step
// in packages/floodgate/src/core/algorithms/<name>.ts, written in the subset below; this emits its
// Redis Lua twin, src/stores/redis/scripts/<name>.lua, and (when its state has fixed words) the
// memory store's one-policy kernel, src/stores/memory/kernels/<name>.ts (scripts/algorithms/ts-kernel.mjs
// says how the kernel is rewritten). The decision over a key's policies is made the same way: the
// Lua twin of src/core/evaluate.ts's createEvaluation and evaluateKeyInto (and what they call; see
// MODULES) is src/stores/redis/scripts/evaluate.lua. With --check it writes nothing and fails when a
// file is stale.
//
// What it writes is build output, gitignored and never committed (a committed copy is the twin kept
// by hand again, and `duplicates` finds it). It runs at every point a tree is built from the
// definitions: the root `prepare` (npm install and npm ci), `prestart` (npm start), the library's
// `build` (and so `prepack`), and scripts/compile-tests.mjs (the test build). Anything else run on
// the sources (benches, the demo) reads what the last of those wrote: after editing a definition,
// run this. packages/floodgate/test/core/algorithms/generated.test.ts holds the tree the tests run
// to what this makes of the definitions, and the pinned runner hashes hold the Lua's bytes.
//
// Why the definition is the TypeScript module itself rather than a third file the two forms are
// printed from: a printed TypeScript copy would be the definition again, line for line. The
// compiler type-checks the definition as it is, and this generator refuses anything outside the
// subset, so what Lua is given is what V8 runs.
//
// The subset (anything else is an error naming the file and line):
// - top level: imports (ignored), `export const x: Algorithm = { name: '…', step(…) {…}, ttlMs(…) {…} }`,
//   and function declarations (helpers, emitted as snake_case Lua locals in dependency order); in a
//   module of MODULES, functions (only those its entries reach are emitted, and so held to the
//   subset), `const x = value` (a Lua local, where those functions read it) and types (ignored);
// - statements: const/let (one name, or `{ a, b } = policy`), assignment (`=`, `+=`, `-=`), if/else,
//   while, `for (let i = A; i < B; i += S)` (B evaluated once, i not assigned in the body), return,
//   `a.push(…)`, `a.length = n` (truncation only), calls of helpers;
// - expressions: numbers, booleans, `undefined`, locals, arithmetic, comparisons, `&&`, `||`, `!`,
//   `??` (left side an object or undefined), `?:` (its true branch never false or undefined),
//   `Math.floor/ceil/max/min`, `a[i]` (0-based: emitted 1-based, but a counter of `for (let i = 0;
//   i < n; i++)` used only as `a[i]` runs from 1 instead), `a.length`, field reads/writes, `a?.b`
//   (`a` a local holding an object or undefined), `{ a: x }` and `[x]` literals, an algorithm's
//   `step`/`ttlMs` called on its const, on `ALGORITHM_BY_NAME[name]` (prelude.lua's ALGORITHMS) or on
//   a local holding one;
// - `writeStep(out, …)` and `writeState(state, …)` (types.ts) are inlined as Lua field and
//   element assignments: a call costs more in Redis's Lua than the arithmetic of a step.
// Numbers are doubles in both languages; `%` is not allowed (Lua's is floored, JavaScript's is not).

import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { basename, dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { emitModuleLua } from './algorithms/lua-module.mjs'
import { algorithmLiteral, emitLua as emitDefinition } from './algorithms/lua-statements.mjs'
import { emitKernel, emitKernelIndex, formatTypeScript, whyNoKernel } from './algorithms/ts-kernel.mjs'

const REPOSITORY = fileURLToPath(new URL('..', import.meta.url))
const PACKAGE = join(REPOSITORY, 'packages/floodgate')
const DEFINITIONS = join(PACKAGE, 'src/core/algorithms')
const SCRIPTS = join(PACKAGE, 'src/stores/redis/scripts')
const KERNELS = join(PACKAGE, 'src/stores/memory/kernels')
/** Files of the algorithms directory that define no algorithm. */
const NOT_DEFINITIONS = new Set(['types.ts', 'index.ts'])
/**
 * Core modules with a Lua twin in scripts/: the functions the Redis scripts call (as their snake_case
 * names), whose closure is emitted. evaluate.ts's other functions (evaluateKey, admitOneInto, …) are
 * TypeScript's alone.
 */
const MODULES = [{ file: 'src/core/evaluate.ts', lua: 'evaluate.lua', entries: ['createEvaluation', 'evaluateKeyInto'] }]

/** Every definition file, by file name, parsed. */
function definitions() {
  return readdirSync(DEFINITIONS)
    .filter((file) => file.endsWith('.ts') && !NOT_DEFINITIONS.has(file))
    .sort()
    .map((file) => {
      const path = join(DEFINITIONS, file)
      return { file, path, source: ts.createSourceFile(path, readFileSync(path, 'utf8'), ts.ScriptTarget.Latest, true) }
    })
}

/** The algorithm objects of every definition: exported const name → algorithm name. */
function algorithmObjects(files) {
  const objects = new Map()
  for (const { source } of files) {
    for (const statement of source.statements) {
      const literal = algorithmLiteral(statement)
      if (literal !== undefined) objects.set(literal.declaration.name.text, literal.name)
    }
  }
  return objects
}

/** Emits one definition's Lua twin (`objects`: every algorithm object, const name → algorithm name). */
export function emitLua(definition, objects) {
  return emitDefinition(definition, objects, PACKAGE)
}

/** Every generated file: path → text. */
export function generate() {
  const files = definitions()
  const objects = algorithmObjects(files)
  const lua = files.map((definition) => [join(SCRIPTS, `${basename(definition.file, '.ts')}.lua`), emitLua(definition, objects)])
  const modules = MODULES.map(({ file, lua, entries }) => {
    const path = join(PACKAGE, file)
    const source = ts.createSourceFile(path, readFileSync(path, 'utf8'), ts.ScriptTarget.Latest, true)
    return [join(SCRIPTS, lua), emitModuleLua({ file: basename(file), path, source }, entries, objects, PACKAGE)]
  })
  return new Map([...lua, ...modules, ...generateKernels(files, objects)])
}

/**
 * The memory store's one-policy kernels (scripts/algorithms/ts-kernel.mjs), one file per algorithm
 * whose state has fixed words, and their index: path → text. A kernel that calls another
 * algorithm's step is emitted after it (it takes that kernel's word count).
 */
export function generateKernels(files = definitions(), objects = algorithmObjects(files)) {
  const byObject = new Map()
  for (const definition of files) {
    for (const statement of definition.source.statements) {
      const literal = algorithmLiteral(statement)
      if (literal !== undefined) byObject.set(literal.declaration.name.text, definition)
    }
  }
  const fileOf = new Map([...byObject].map(([name, definition]) => [name, definition.file]))
  const made = new Map()
  const without = []
  const kernelOf = (objectName) => {
    if (made.has(objectName)) return made.get(objectName)
    const definition = byObject.get(objectName)
    const why = whyNoKernel(definition)
    if (why !== undefined) {
      without.push([objects.get(objectName), why])
      made.set(objectName, undefined)
      return undefined
    }
    const wordsOf = (other) => {
      const kernel = kernelOf(other)
      if (kernel === undefined) throw new Error(`${definition.file}: calls ${other}, which has no kernel`)
      return kernel.words
    }
    const kernel = { ...emitKernel(definition, objects, fileOf, wordsOf, PACKAGE), file: basename(definition.file, '.ts') }
    made.set(objectName, kernel)
    return kernel
  }
  for (const objectName of byObject.keys()) kernelOf(objectName)
  const kernels = [...made.values()].filter((kernel) => kernel !== undefined).sort((a, b) => a.file.localeCompare(b.file))
  without.sort((a, b) => a[0].localeCompare(b[0]))
  const out = kernels.map((kernel) => [join(KERNELS, `${kernel.file}.ts`), kernel.text])
  out.push([join(KERNELS, 'index.ts'), emitKernelIndex(kernels, without)])
  return out.map(([path, text]) => [path, formatTypeScript(text, path, REPOSITORY)])
}

/**
 * Writes every generated file that is missing or differs from what the definitions make today
 * (`check`: writes nothing); returns the paths that were (or, with `check`, would be) written.
 */
export function writeGenerated({ check = false } = {}) {
  const stale = []
  for (const [path, text] of generate()) {
    let current
    try {
      current = readFileSync(path, 'utf8')
    } catch {
      current = undefined
    }
    if (current === text) continue
    stale.push(relative(REPOSITORY, path))
    if (check) continue
    mkdirSync(dirname(path), { recursive: true })
    writeFileSync(path, text)
  }
  return stale
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const check = process.argv.includes('--check')
  const stale = writeGenerated({ check })
  if (check && stale.length > 0) {
    console.error(`Stale generated algorithm twins (run node scripts/gen-algorithms.mjs):\n${stale.join('\n')}`)
    process.exit(1)
  }
  if (!check) console.log(stale.length === 0 ? 'algorithm twins up to date' : `wrote ${stale.join(', ')}`)
}
