// One algorithm definition (scripts/gen-algorithms.mjs's subset) as the memory store's one-policy
// kernel: the same step, rewritten to read its state from the record's words in the slab's
// Float64Array and to leave its new state in the result's fields, plus a `decide` that writes the
// record in place as evaluateKeyInto and KeyTable.write would. TypeScript in, TypeScript out:
// the compiler's own transformer rewrites the definition and its printer prints it, so the kernel's
// arithmetic is the definition's, token for token.
//
// The rewrites (anything else that touches the state is an error naming the line):
// - `state[k]` → `f64[s + k]`; `state !== undefined` → `live` (and `=== undefined` → `!live`);
// - `x.state[k]` (a result's new state) → `x.nk`; `writeState(x.state, a, b, c)` → `x.n0 = a; …`;
// - `writeStep(out, …)` → one assignment a field of `out` (`const r = writeStep(out, …)` → `const r = out`
//   and r's fields), `out` always given: as the Lua twin inlines it, so no hand-kept setter remains;
// - a state passed on (a helper's `State` parameter, another algorithm's step or ttlMs) → `f64, s`
//   (and `live` where the parameter may be undefined); helpers that take no state are imported from
//   the definition itself, never copied.
// A definition whose state grows with use (a log, leases: `state.length`, copyState,
// createStepResult) has no kernel; `kernelOf` answers the reason instead.

import { spawnSync } from 'node:child_process'
import { join, relative } from 'node:path'
import ts from 'typescript'
import { algorithmLiteral } from './lua-statements.mjs'

const f = ts.factory
/** Calls that make a state of a length of its own: such an algorithm keeps no fixed words. */
const GROWING = new Set(['copyState', 'createStepResult'])

/** `fixedWindow` → `fixed-window.ts`'s kernel names. */
const kernelNames = (objectName) => ({ step: `${objectName}Step`, ttl: `${objectName}Ttl`, decide: `${objectName}Decide` })

/** Why a definition has no kernel (its state grows with use), or undefined when it has one. */
export function whyNoKernel(definition) {
  let why
  const visit = (node) => {
    if (why !== undefined) return
    if (ts.isIdentifier(node) && GROWING.has(node.text) && !ts.isImportSpecifier(node.parent)) why = `it calls ${node.text}`
    if (ts.isPropertyAccessExpression(node) && node.name.text === 'length' && isStateName(node.expression)) why = 'it reads state.length'
    ts.forEachChild(node, visit)
  }
  visit(definition.source)
  return why
}

const isStateName = (node) =>
  ts.isIdentifier(ts.isNonNullExpression(node) ? node.expression : node) && (node.expression ?? node).text === 'state'
const isStateType = (type) => type !== undefined && /^State(\s*\|\s*undefined)?$/.test(type.getText())
const mayBeUndefined = (type) => /undefined/.test(type.getText())

/**
 * The kernel of one definition: { objectName, words, text }. `objects`: every algorithm object
 * (const name → algorithm name); `files`: const name → definition file name; `wordsOf`: the state
 * words of another algorithm's kernel (for a step that calls one).
 */
export function emitKernel(definition, objects, files, wordsOf, packageDirectory) {
  const { file, source } = definition
  const fail = (node, message) => {
    const { line } = source.getLineAndCharacterOfPosition(node.getStart())
    throw new Error(`${file}:${line + 1}: ${message} (outside the kernel subset of scripts/algorithms/ts-kernel.mjs)`)
  }
  const helpers = new Map()
  let algorithm
  for (const statement of source.statements) {
    if (ts.isFunctionDeclaration(statement)) helpers.set(statement.name.text, statement)
    const literal = algorithmLiteral(statement)
    if (literal !== undefined) algorithm = literal
  }
  const objectName = algorithm.declaration.name.text
  // Per helper: which parameters are states (and whether each may be undefined); none: imported as is.
  const stateParameters = new Map()
  for (const [name, fn] of helpers) {
    const states = fn.parameters.map((p) => (isStateType(p.type) ? (mayBeUndefined(p.type) ? 'maybe' : 'state') : undefined))
    if (states.some((s) => s !== undefined)) stateParameters.set(name, states)
  }
  const imported = new Set()
  const called = new Set()
  const arities = new Set()

  const identifier = (name) => f.createIdentifier(name)
  const stateArguments = (maybe) =>
    maybe ? [identifier('f64'), identifier('s'), identifier('live')] : [identifier('f64'), identifier('s')]
  const stateParameterNodes = (maybe) => [
    f.createParameterDeclaration(undefined, undefined, 'f64', undefined, f.createTypeReferenceNode('Float64Array')),
    f.createParameterDeclaration(undefined, undefined, 's', undefined, f.createKeywordTypeNode(ts.SyntaxKind.NumberKeyword)),
    ...(maybe
      ? [f.createParameterDeclaration(undefined, undefined, 'live', undefined, f.createKeywordTypeNode(ts.SyntaxKind.BooleanKeyword))]
      : []),
  ]

  // `stateNames`: the names that stand for the state in the function being rewritten.
  function rewrite(node, stateNames, maybeNames) {
    const visit = (node) => {
      if (ts.isElementAccessExpression(node)) {
        if (ts.isIdentifier(node.expression) && stateNames.has(node.expression.text)) {
          const index = ts.visitNode(node.argumentExpression, visit)
          const at =
            ts.isNumericLiteral(index) && index.text === '0'
              ? identifier('s')
              : f.createBinaryExpression(identifier('s'), ts.SyntaxKind.PlusToken, index)
          return f.createElementAccessExpression(identifier('f64'), at)
        }
        if (ts.isPropertyAccessExpression(node.expression) && node.expression.name.text === 'state') {
          if (!ts.isNumericLiteral(node.argumentExpression)) fail(node, 'a new state read at an index that is not a constant')
          return f.createPropertyAccessExpression(ts.visitNode(node.expression.expression, visit), `n${node.argumentExpression.text}`)
        }
      }
      if (ts.isBinaryExpression(node) && isUndefinedTest(node, stateNames)) {
        const name = ts.isIdentifier(node.left) && stateNames.has(node.left.text) ? node.left.text : node.right.text
        if (!maybeNames.has(name)) fail(node, 'an undefined test of a state that is never undefined')
        const live = identifier('live')
        return node.operatorToken.kind === ts.SyntaxKind.ExclamationEqualsEqualsToken
          ? live
          : f.createPrefixUnaryExpression(ts.SyntaxKind.ExclamationToken, live)
      }
      if (ts.isCallExpression(node)) return call(node, visit, stateNames, maybeNames)
      const isName = node.parent !== undefined && ts.isPropertyAccessExpression(node.parent) && node.parent.name === node
      if (ts.isIdentifier(node) && !isName && stateNames.has(node.text))
        fail(node, 'the state used other than as state[k], in an undefined test or passed on')
      if (ts.isPropertyAccessExpression(node) && node.name.text === 'state' && !isStateName(node.expression)) {
        fail(node, 'a new state used other than as x.state[k] or in writeState')
      }
      if (ts.isTypeReferenceNode(node) && ts.isIdentifier(node.typeName) && node.typeName.text === 'StepResult') {
        return f.createTypeReferenceNode('KernelStep')
      }
      return ts.visitEachChild(node, visit, ts.nullTransformationContext)
    }
    return ts.visitNode(node, visit)
  }

  function isUndefinedTest(node, stateNames) {
    const kind = node.operatorToken.kind
    if (kind !== ts.SyntaxKind.EqualsEqualsEqualsToken && kind !== ts.SyntaxKind.ExclamationEqualsEqualsToken) return false
    const isState = (n) => ts.isIdentifier(n) && stateNames.has(n.text)
    const isUndefined = (n) => ts.isIdentifier(n) && n.text === 'undefined'
    return (isState(node.left) && isUndefined(node.right)) || (isUndefined(node.left) && isState(node.right))
  }

  // Arguments with each state passed on expanded to its words.
  function passOn(args, kinds, visit, stateNames, maybeNames) {
    const out = []
    args.forEach((arg, i) => {
      if (kinds[i] === undefined) return out.push(ts.visitNode(arg, visit))
      if (!ts.isIdentifier(arg) || !stateNames.has(arg.text)) fail(arg, 'a state argument that is not the state itself')
      if (kinds[i] === 'maybe' && !maybeNames.has(arg.text)) out.push(...stateArguments(false), f.createTrue())
      else out.push(...stateArguments(kinds[i] === 'maybe'))
    })
    return out
  }

  function call(node, visit, stateNames, maybeNames) {
    const callee = node.expression
    if (ts.isIdentifier(callee)) {
      if (callee.text === 'writeStep') fail(node, 'writeStep other than as a statement or a const initializer')
      if (callee.text === 'writeState') fail(node, 'writeState other than as a statement')
      const kinds = stateParameters.get(callee.text)
      if (kinds !== undefined)
        return f.createCallExpression(identifier(callee.text), undefined, passOn(node.arguments, kinds, visit, stateNames, maybeNames))
      if (helpers.has(callee.text)) imported.add(callee.text)
    }
    if (ts.isPropertyAccessExpression(callee) && ts.isIdentifier(callee.expression) && objects.has(callee.expression.text)) {
      const other = callee.expression.text
      const names = kernelNames(other)
      const member = callee.name.text
      if (member !== 'step' && member !== 'ttlMs') fail(node, `the algorithm method ${member}`)
      called.add(other)
      const kinds = member === 'step' ? ['maybe', undefined, undefined, undefined, undefined] : ['state', undefined, undefined]
      return f.createCallExpression(
        identifier(member === 'step' ? names.step : names.ttl),
        undefined,
        passOn(node.arguments, kinds, visit, stateNames, maybeNames),
      )
    }
    return ts.visitEachChild(node, visit, ts.nullTransformationContext)
  }

  // writeStep(out, allowed, remaining, resetMs, retryAfterMs, delayMs) as one assignment a field of
  // `target`. The values are read as they are assigned, so none may read the result itself.
  function writeStepFields(node, target, stateNames, maybeNames) {
    if (node.arguments.length !== 6) fail(node, 'writeStep takes six arguments')
    if (!ts.isIdentifier(node.arguments[0])) fail(node, 'writeStep into anything but the result parameter')
    const written = new Set([node.arguments[0].text, target])
    const reads = (n) => (ts.isIdentifier(n) && written.has(n.text)) || ts.forEachChild(n, reads) === true
    const fields = ['allowed', 'remaining', 'resetMs', 'retryAfterMs', 'delayMs']
    return node.arguments.slice(1).map((value, i) => {
      if (reads(value)) fail(value, 'a writeStep value that reads the result it is written into')
      const field = f.createPropertyAccessExpression(identifier(target), fields[i])
      return f.createExpressionStatement(f.createAssignment(field, rewrite(value, stateNames, maybeNames)))
    })
  }

  // `writeState(x.state, a, b, c)` as one assignment a word, writeStep as one a field.
  function statements(block, stateNames, maybeNames) {
    const visitStatement = (node) => {
      if (ts.isVariableStatement(node) && node.declarationList.declarations.length === 1) {
        const [declaration] = node.declarationList.declarations
        const init = declaration.initializer
        if (init !== undefined && ts.isCallExpression(init) && ts.isIdentifier(init.expression) && init.expression.text === 'writeStep') {
          if (!ts.isIdentifier(declaration.name)) fail(node, 'a writeStep result destructured')
          const name = declaration.name.text
          const alias = f.createVariableStatement(
            undefined,
            f.createVariableDeclarationList(
              [f.createVariableDeclaration(name, undefined, undefined, init.arguments[0])],
              node.declarationList.flags,
            ),
          )
          return [alias, ...writeStepFields(init, name, stateNames, maybeNames)]
        }
      }
      if (ts.isExpressionStatement(node) && ts.isCallExpression(node.expression)) {
        const callNode = node.expression
        if (ts.isIdentifier(callNode.expression) && callNode.expression.text === 'writeStep') {
          if (!ts.isIdentifier(callNode.arguments[0])) fail(node, 'writeStep into anything but the result parameter')
          return writeStepFields(callNode, callNode.arguments[0].text, stateNames, maybeNames)
        }
        if (ts.isIdentifier(callNode.expression) && callNode.expression.text === 'writeState') {
          const [target, ...values] = callNode.arguments
          if (!ts.isPropertyAccessExpression(target) || target.name.text !== 'state') fail(node, 'writeState into anything but x.state')
          arities.add(values.length)
          const owner = rewrite(target.expression, stateNames, maybeNames)
          return values.map((value, i) =>
            f.createExpressionStatement(
              f.createAssignment(f.createPropertyAccessExpression(owner, `n${i}`), rewrite(value, stateNames, maybeNames)),
            ),
          )
        }
      }
      if (ts.isBlock(node) || ts.isIfStatement(node) || ts.isWhileStatement(node) || ts.isForStatement(node)) {
        return ts.visitEachChild(node, visitStatement, ts.nullTransformationContext)
      }
      if (ts.isStatement(node)) return rewrite(node, stateNames, maybeNames)
      return rewrite(node, stateNames, maybeNames)
    }
    return ts.visitNode(block, visitStatement)
  }

  // A function or method as a kernel function: state parameters become words.
  function kernelFunction(name, fn, exported, outRequired) {
    const stateNames = new Set()
    const maybeNames = new Set()
    const parameters = []
    for (const parameter of fn.parameters) {
      const parameterName = parameter.name.getText()
      if (isStateType(parameter.type)) {
        stateNames.add(parameterName)
        if (mayBeUndefined(parameter.type)) maybeNames.add(parameterName)
        parameters.push(...stateParameterNodes(mayBeUndefined(parameter.type)))
        continue
      }
      let type = parameter.type === undefined ? undefined : rewrite(parameter.type, stateNames, maybeNames)
      // The result is always given: a kernel allocates nothing.
      if (outRequired && /StepResult/.test(parameter.type?.getText() ?? '')) type = f.createTypeReferenceNode('KernelStep')
      parameters.push(f.createParameterDeclaration(undefined, undefined, parameterName, undefined, type))
    }
    const returnType = fn.type === undefined ? undefined : rewrite(fn.type, stateNames, maybeNames)
    const body = statements(fn.body, stateNames, maybeNames)
    const modifiers = exported ? [f.createModifier(ts.SyntaxKind.ExportKeyword)] : undefined
    return f.createFunctionDeclaration(modifiers, undefined, name, undefined, parameters, returnType, body)
  }

  const method = (key) => algorithm.object.properties.find((p) => p.name?.getText() === key)
  const names = kernelNames(objectName)
  const functions = [
    kernelFunction(names.step, method('step'), true, true),
    kernelFunction(names.ttl, method('ttlMs'), true, true),
    ...[...stateParameters.keys()].map((name) => kernelFunction(name, helpers.get(name), false, true)),
  ]
  for (const other of called) for (const words of [wordsOf(other)]) arities.add(words)
  if (arities.size !== 1) fail(algorithm.declaration, `states of ${[...arities].join(' and ')} numbers: a kernel keeps one length`)
  const words = [...arities][0]
  for (const name of imported) {
    if (!helpers.get(name).modifiers?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword)) {
      fail(helpers.get(name), `the helper ${name} is called by the kernel: export it (the kernel imports it, never copies it)`)
    }
  }

  const printer = ts.createPrinter({ newLine: ts.NewLineKind.LineFeed })
  const print = (node) => printer.printNode(ts.EmitHint.Unspecified, node, source)
  const relativeSource = relative(packageDirectory, definition.path)
  const base = file.replace(/\.ts$/, '')
  const out = [
    `// GENERATED by scripts/gen-algorithms.mjs from ${relativeSource}: do not edit; edit that file and`,
    '// run `node scripts/gen-algorithms.mjs`. Its step on a record of the memory store, in place (see kernel-step.ts).',
    '',
    "import type { Policy } from '../../../core/policy.js'",
    "import type { KernelStep } from '../kernel-step.js'",
  ]
  if (imported.size > 0) out.push(`import { ${[...imported].sort().join(', ')} } from '../../../core/algorithms/${base}.js'`)
  for (const other of [...called].sort()) {
    const n = kernelNames(other)
    out.push(`import { ${n.step}, ${n.ttl} } from './${files.get(other).replace(/\.ts$/, '')}.js'`)
  }
  out.push('', `/** The state words of a ${algorithm.name} record. */`, `export const ${objectName}Words = ${words}`)
  for (const fn of functions) out.push('', print(fn))
  out.push('', decideText(objectName, algorithm.name, words))
  return { objectName, name: algorithm.name, words, text: `${out.join('\n')}\n` }
}

// The record written in place: what evaluateKeyInto decides for one policy and KeyTable.write stores.
function decideText(objectName, name, words) {
  const n = kernelNames(objectName)
  const store = Array.from({ length: words }, (_, i) => `    f64[s${i === 0 ? '' : ` + ${i}`}] = out.n${i}`).join('\n')
  return `/**
 * One ${name} request decided on the record whose first word (its expiry) is at \`base\`, its state
 * words after it, as evaluateKeyInto decides a set of one policy and KeyTable.write stores it: an
 * admission keeps the new state, a denial the old one; an expired record or one with no state reads
 * as none, and a denial of none keeps none. Answers false, having written nothing, for a denial that
 * starts a block period (the general path decides it again: a step is pure).
 */
export function ${n.decide}(f64: Float64Array, base: number, now: number, cost: number, policy: Policy, out: KernelStep): boolean {
  const s = base + 1
  // The first state word is NaN when the record holds no state.
  const live = now < f64[base] && !Number.isNaN(f64[s])
  ${n.step}(f64, s, live, now, cost, policy, out)
  if (out.allowed) {
${store}
    out.ttlMs = ${n.ttl}(f64, s, now, policy)
  } else if (cost > 0 && policy.blockMs > 0) {
    return false
  } else if (live) {
    out.ttlMs = ${n.ttl}(f64, s, now, policy)
  } else {
    out.ttlMs = 1
    f64[s] = Number.NaN
    f64[s + 1] = -1
  }
  f64[base] = now + out.ttlMs
  return true
}`
}

/** The kernels' index: each algorithm with a kernel, by name; those without one, and why. */
export function emitKernelIndex(kernels, without) {
  const out = [
    '// GENERATED by scripts/gen-algorithms.mjs: do not edit. The one-policy kernel of each algorithm',
    '// whose state has fixed words; the others are decided by the general path only:',
    ...without.map(([name, why]) => `// - ${name}: its state grows with use (${why}).`),
    '',
    "import type { AlgorithmName } from '../../../core/policy.js'",
    "import type { Kernel } from '../kernel-step.js'",
    ...kernels.map((k) => `import { ${k.objectName}Decide, ${k.objectName}Words } from './${k.file}.js'`),
    '',
    '/** Per algorithm with fixed state words: its kernel and the number of its words. */',
    'export const KERNELS: Partial<Record<AlgorithmName, { readonly decide: Kernel; readonly words: number }>> = {',
    ...kernels.map((k) => `  '${k.name}': { decide: ${k.objectName}Decide, words: ${k.objectName}Words },`),
    '}',
  ]
  return `${out.join('\n')}\n`
}

/**
 * Formats generated TypeScript as the repository's biome does (the printer's layout is its own).
 * The kernels are gitignored (build output), and biome hands an ignored path's text back as it came
 * unless told not to read the ignore file.
 */
export function formatTypeScript(text, path, repository) {
  const biome = join(repository, 'node_modules/.bin/biome')
  const args = ['format', '--vcs-use-ignore-file=false', `--stdin-file-path=${path}`]
  const result = spawnSync(biome, args, { input: text, encoding: 'utf8', cwd: repository })
  if (result.status !== 0) throw new Error(`biome format ${path}: ${result.stderr}`)
  return result.stdout
}
