// One algorithm definition (scripts/gen-algorithms.mjs's subset) as its Lua twin: the statements,
// the helpers in dependency order and the ALGORITHMS registration. Expressions: lua-expressions.mjs.

import { relative } from 'node:path'
import ts from 'typescript'
import { expressionEmitter, luaName, METHODS } from './lua-expressions.mjs'

/** An `export const x: Algorithm = { name: '…', … }` statement's parts, or undefined. */
export function algorithmLiteral(statement) {
  if (!ts.isVariableStatement(statement)) return undefined
  const declaration = statement.declarationList.declarations[0]
  if (declaration?.initializer === undefined || !ts.isObjectLiteralExpression(declaration.initializer)) return undefined
  const nameProperty = declaration.initializer.properties.find((p) => p.name?.getText() === 'name')
  if (nameProperty === undefined || !ts.isStringLiteral(nameProperty.initializer)) return undefined
  return { declaration, object: declaration.initializer, name: nameProperty.initializer.text }
}

/** Emits one definition's Lua twin. */
export function emitLua(definition, objects, packageDirectory) {
  const { file, source } = definition
  const fail = (node, message) => {
    const { line } = source.getLineAndCharacterOfPosition(node.getStart())
    throw new Error(`${file}:${line + 1}: ${message} (outside the algorithm subset of scripts/gen-algorithms.mjs)`)
  }
  const functions = new Map()
  let algorithm
  for (const statement of source.statements) {
    if (ts.isImportDeclaration(statement)) continue
    if (ts.isFunctionDeclaration(statement)) {
      functions.set(statement.name.text, statement)
      continue
    }
    const literal = algorithmLiteral(statement)
    if (literal === undefined || algorithm !== undefined) fail(statement, 'only imports, helper functions and one algorithm object')
    algorithm = literal
  }
  if (algorithm === undefined) fail(source, 'no algorithm object')

  const { expression, operandOf, plusOne, minusOne, call } = expressionEmitter(fail, functions, objects)
  const out = []
  const line = (depth, text) => out.push(`${'  '.repeat(depth)}${text}`)

  // `for i = from, to do a[i] = nil end`: the truncation `a.length = n`.
  function truncate(depth, array, length) {
    const name = expression(array)
    line(depth, `for i = ${plusOne(length)}, #${name} do ${name}[i] = nil end`)
  }

  const isLengthOf = (node) => ts.isPropertyAccessExpression(node) && node.name.text === 'length'
  const isCallOf = (node, name) => ts.isCallExpression(node) && ts.isIdentifier(node.expression) && node.expression.text === name

  // writeStep(out, allowed, remaining, resetMs, retryAfterMs, delayMs) into `target`.
  function writeStep(depth, target, node) {
    if (node.arguments.length !== 6) fail(node, 'writeStep takes six arguments')
    // One assignment a field: a multiple assignment first copies every value to a register of its own.
    const fields = ['allowed', 'remaining', 'resetMs', 'retryAfterMs', 'delayMs']
    node.arguments.slice(1).forEach((value, i) => line(depth, `${target}.${fields[i]} = ${expression(value)}`))
  }

  function statement(node, depth) {
    if (ts.isBlock(node)) {
      for (const inner of node.statements) statement(inner, depth)
      return
    }
    if (ts.isVariableStatement(node)) {
      for (const declaration of node.declarationList.declarations) variable(declaration, depth)
      return
    }
    if (ts.isReturnStatement(node)) {
      line(depth, node.expression === undefined ? 'return' : `return ${expression(node.expression)}`)
      return
    }
    if (ts.isIfStatement(node)) {
      // `if (a.length !== n) a.length = n` only spares V8 a resize; the Lua truncation is the whole of it.
      const then = node.thenStatement
      if (
        node.elseStatement === undefined &&
        ts.isExpressionStatement(then) &&
        ts.isBinaryExpression(then.expression) &&
        isLengthOf(then.expression.left) &&
        ts.isBinaryExpression(node.expression) &&
        node.expression.operatorToken.kind === ts.SyntaxKind.ExclamationEqualsEqualsToken &&
        node.expression.left.getText() === then.expression.left.getText() &&
        node.expression.right.getText() === then.expression.right.getText()
      ) {
        truncate(depth, then.expression.left.expression, then.expression.right)
        return
      }
      let branch = node
      line(depth, `if ${expression(branch.expression)} then`)
      for (;;) {
        statement(branch.thenStatement, depth + 1)
        const otherwise = branch.elseStatement
        if (otherwise === undefined) break
        if (ts.isIfStatement(otherwise)) {
          branch = otherwise
          line(depth, `elseif ${expression(branch.expression)} then`)
          continue
        }
        line(depth, 'else')
        statement(otherwise, depth + 1)
        break
      }
      line(depth, 'end')
      return
    }
    if (ts.isWhileStatement(node)) {
      line(depth, `while ${expression(node.expression)} do`)
      statement(node.statement, depth + 1)
      line(depth, 'end')
      return
    }
    if (ts.isForStatement(node)) {
      forLoop(node, depth)
      return
    }
    if (node.kind === ts.SyntaxKind.BreakStatement) {
      line(depth, 'break')
      return
    }
    if (ts.isExpressionStatement(node)) {
      expressionStatement(node.expression, depth)
      return
    }
    fail(node, `the statement ${ts.SyntaxKind[node.kind]}`)
  }

  function variable(declaration, depth) {
    const init = declaration.initializer
    if (ts.isObjectBindingPattern(declaration.name)) {
      if (init === undefined || !ts.isIdentifier(init)) fail(declaration, 'destructuring of anything but a local')
      const names = declaration.name.elements.map((element) => {
        if (element.propertyName !== undefined || element.initializer !== undefined || element.dotDotDotToken)
          fail(element, 'a renaming destructuring')
        return element.name.text
      })
      line(depth, `local ${names.join(', ')} = ${names.map((name) => `${init.text}.${name}`).join(', ')}`)
      return
    }
    if (!ts.isIdentifier(declaration.name)) fail(declaration, 'an array destructuring')
    const name = expression(declaration.name)
    if (init === undefined) {
      line(depth, `local ${name}`)
    } else if (isCallOf(init, 'writeStep')) {
      line(depth, `local ${name} = ${expression(init.arguments[0])} or createStepResult()`)
      writeStep(depth, name, init)
    } else {
      line(depth, `local ${name} = ${expression(init)}`)
    }
  }

  function expressionStatement(node, depth) {
    if (ts.isCallExpression(node)) {
      const callee = node.expression
      if (isCallOf(node, 'writeStep')) {
        if (!ts.isIdentifier(node.arguments[0])) fail(node, 'writeStep of anything but a local result')
        writeStep(depth, node.arguments[0].text, node)
        return
      }
      if (isCallOf(node, 'writeState')) {
        const [target, ...values] = node.arguments
        line(depth, `local numbers = ${expression(target)}`)
        line(depth, `${values.map((_, i) => `numbers[${i + 1}]`).join(', ')} = ${values.map(expression).join(', ')}`)
        line(depth, `for i = ${values.length + 1}, #numbers do numbers[i] = nil end`)
        return
      }
      if (ts.isPropertyAccessExpression(callee) && callee.name.text === 'push') {
        const array = expression(callee.expression)
        for (const value of node.arguments) line(depth, `${array}[#${array} + 1] = ${expression(value)}`)
        return
      }
      line(depth, call(node))
      return
    }
    if (ts.isBinaryExpression(node)) {
      const kind = node.operatorToken.kind
      if (kind === ts.SyntaxKind.EqualsToken && isLengthOf(node.left)) {
        truncate(depth, node.left.expression, node.right)
        return
      }
      const target = expression(node.left)
      if (kind === ts.SyntaxKind.EqualsToken) return line(depth, `${target} = ${expression(node.right)}`)
      if (kind === ts.SyntaxKind.PlusEqualsToken) return line(depth, `${target} = ${target} + ${operandOf(node.right, 5, true)}`)
      if (kind === ts.SyntaxKind.MinusEqualsToken) return line(depth, `${target} = ${target} - ${operandOf(node.right, 5, true)}`)
    }
    fail(node, `the expression statement ${node.getText()}`)
  }

  function forLoop(node, depth) {
    const init = node.initializer
    const declaration = init !== undefined && ts.isVariableDeclarationList(init) ? init.declarations[0] : undefined
    if (declaration === undefined || !ts.isIdentifier(declaration.name) || declaration.initializer === undefined) {
      fail(node, 'a for loop without `let i = start`')
    }
    const name = declaration.name.text
    const condition = node.condition
    if (condition === undefined || !ts.isBinaryExpression(condition) || condition.left.getText() !== name)
      fail(node, 'a for condition other than i < end')
    let limit
    if (condition.operatorToken.kind === ts.SyntaxKind.LessThanEqualsToken) limit = expression(condition.right)
    else if (condition.operatorToken.kind === ts.SyntaxKind.LessThanToken) limit = minusOne(condition.right)
    else fail(node, 'a for condition other than i < end or i <= end')
    const step = node.incrementor
    let by
    if (step !== undefined && ts.isPostfixUnaryExpression(step) && step.operator === ts.SyntaxKind.PlusPlusToken) by = '1'
    else if (step !== undefined && ts.isBinaryExpression(step) && step.operatorToken.kind === ts.SyntaxKind.PlusEqualsToken) {
      if (!ts.isNumericLiteral(step.right)) fail(node, 'a for step that is not a constant')
      by = step.right.text
    } else fail(node, 'a for step other than i++ or i += k')
    assertNotAssigned(node.statement, name)
    line(depth, `for ${name} = ${expression(declaration.initializer)}, ${limit}${by === '1' ? '' : `, ${by}`} do`)
    statement(node.statement, depth + 1)
    line(depth, 'end')
  }

  // Lua's numeric for keeps its own counter: a body that assigns it would loop differently.
  function assertNotAssigned(body, name) {
    const visit = (node) => {
      if (ts.isBinaryExpression(node) && node.operatorToken.kind >= ts.SyntaxKind.FirstAssignment) {
        if (node.operatorToken.kind <= ts.SyntaxKind.LastAssignment && node.left.getText() === name)
          fail(node, `the for counter ${name} assigned in its body`)
      }
      if ((ts.isPostfixUnaryExpression(node) || ts.isPrefixUnaryExpression(node)) && node.operand.getText() === name) {
        if (node.operator === ts.SyntaxKind.PlusPlusToken || node.operator === ts.SyntaxKind.MinusMinusToken)
          fail(node, `the for counter ${name} changed`)
      }
      ts.forEachChild(node, visit)
    }
    visit(body)
  }

  function parameters(fn) {
    return fn.parameters.map((parameter) => expression(parameter.name)).join(', ')
  }

  function body(fn, depth) {
    statement(fn.body, depth)
  }

  // Helpers in dependency order: a Lua local is visible only below its declaration.
  const ordered = []
  const placed = new Set()
  const place = (name, path) => {
    if (placed.has(name)) return
    if (path.includes(name)) fail(functions.get(name), `helpers that call each other (${[...path, name].join(' → ')})`)
    const visit = (node) => {
      if (ts.isCallExpression(node) && ts.isIdentifier(node.expression) && functions.has(node.expression.text)) {
        if (node.expression.text !== name) place(node.expression.text, [...path, name])
      }
      ts.forEachChild(node, visit)
    }
    visit(functions.get(name))
    placed.add(name)
    ordered.push(name)
  }
  for (const name of functions.keys()) place(name, [])

  const relativeSource = relative(packageDirectory, definition.path)
  out.push(`-- GENERATED by scripts/gen-algorithms.mjs from ${relativeSource}: do not edit; edit that file and`)
  out.push('-- run `node scripts/gen-algorithms.mjs`. The Lua twin of its step, with the same arithmetic.')
  for (const name of ordered) {
    const fn = functions.get(name)
    out.push('')
    line(0, `local function ${luaName(name)}(${parameters(fn)})`)
    body(fn, 1)
    line(0, 'end')
  }
  out.push('')
  line(0, `ALGORITHMS['${algorithm.name}'] = {`)
  for (const property of algorithm.object.properties) {
    const key = property.name.getText()
    if (key === 'name') continue
    if (!ts.isMethodDeclaration(property) || !(key in METHODS)) fail(property, `the algorithm member ${key}`)
    line(1, `${METHODS[key]} = function(${parameters(property)})`)
    body(property, 2)
    line(1, 'end,')
  }
  line(0, '}')
  return `${out.join('\n')}\n`
}
