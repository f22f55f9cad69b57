// The expressions of the algorithm subset (scripts/gen-algorithms.mjs) as Lua: operators, 1-based
// indexes, `#` lengths, Math, object literals, calls of helpers and of algorithms' methods.

import ts from 'typescript'

/** Helpers prelude.lua defines under the same names. */
const PRELUDE = new Set(['createStepResult', 'copyState'])
const MATH = new Set(['floor', 'ceil', 'max', 'min'])
const LUA_RESERVED = new Set([
  'and',
  'break',
  'do',
  'else',
  'elseif',
  'end',
  'function',
  'in',
  'local',
  'nil',
  'not',
  'or',
  'repeat',
  'then',
  'until',
])
/** Lua precedence (higher binds tighter): JavaScript's equality and relational levels are one here. */
const PRECEDENCE = { or: 1, and: 2, '<': 3, '>': 3, '<=': 3, '>=': 3, '==': 3, '~=': 3, '+': 5, '-': 5, '*': 6, '/': 6 }
/** JavaScript's operators by token name, and Lua's for each. */
const OPERATORS = Object.fromEntries(
  Object.entries({
    ...{ BarBarToken: 'or', QuestionQuestionToken: 'or', AmpersandAmpersandToken: 'and' },
    ...{ LessThanToken: '<', GreaterThanToken: '>', LessThanEqualsToken: '<=', GreaterThanEqualsToken: '>=' },
    ...{ EqualsEqualsEqualsToken: '==', ExclamationEqualsEqualsToken: '~=' },
    ...{ PlusToken: '+', MinusToken: '-', AsteriskToken: '*', SlashToken: '/' },
  }).map(([token, lua]) => [ts.SyntaxKind[token], lua]),
)
/** core/algorithms/index.ts's registry of algorithms by name. */
const REGISTRY = 'ALGORITHM_BY_NAME'
/** TypeScript method names of an Algorithm and their Lua twins' (the runners call `ttl`). */
export const METHODS = { step: 'step', ttlMs: 'ttl' }

/** A helper's Lua name, snake_case as Lua's own (merge.lua calls leaky_bucket_stored_level). */
export function luaName(name) {
  return name.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`)
}

/**
 * The expression emitter of one definition: `fail(node, message)` throws naming the line,
 * `functions` its helpers by name, `objects` every algorithm object (const name → algorithm name).
 */
export function expressionEmitter(fail, functions, objects) {
  // For counters a loop runs from 1 in Lua (lua-statements.mjs's forLoop): each is only ever an index.
  const oneBased = new Set()

  function expression(node) {
    if (ts.isParenthesizedExpression(node)) return `(${expression(node.expression)})`
    if (ts.isNonNullExpression(node) || ts.isAsExpression(node)) return expression(node.expression)
    if (ts.isNumericLiteral(node)) return node.text
    if (ts.isStringLiteral(node)) return `'${node.text}'`
    if (node.kind === ts.SyntaxKind.TrueKeyword) return 'true'
    if (node.kind === ts.SyntaxKind.FalseKeyword) return 'false'
    if (ts.isIdentifier(node)) {
      if (node.text === 'undefined') return 'nil'
      if (LUA_RESERVED.has(node.text)) fail(node, `a Lua keyword as a name: ${node.text}`)
      if (oneBased.has(node.text)) fail(node, `the counter ${node.text} used other than as an index`)
      return node.text
    }
    if (ts.isPrefixUnaryExpression(node)) {
      const operand = operandOf(node.operand, 7, false)
      if (node.operator === ts.SyntaxKind.ExclamationToken) return `not ${operand}`
      if (node.operator === ts.SyntaxKind.MinusToken) return `-${operand}`
      fail(node, 'a unary operator other than ! and -')
    }
    if (ts.isBinaryExpression(node)) {
      const operator = OPERATORS[node.operatorToken.kind]
      if (operator === undefined) fail(node, `the operator ${node.operatorToken.getText()}`)
      const precedence = PRECEDENCE[operator]
      return `${operandOf(node.left, precedence, false)} ${operator} ${operandOf(node.right, precedence, true)}`
    }
    if (ts.isConditionalExpression(node)) {
      const whenTrue = node.whenTrue
      if (ts.isPrefixUnaryExpression(whenTrue) && whenTrue.operator === ts.SyntaxKind.ExclamationToken)
        fail(node, 'a ?: whose true branch may be false')
      if (whenTrue.kind === ts.SyntaxKind.FalseKeyword || (ts.isIdentifier(whenTrue) && whenTrue.text === 'undefined')) {
        fail(node, 'a ?: whose true branch is false or undefined')
      }
      return `(${expression(node.condition)} and ${expression(whenTrue)} or ${expression(node.whenFalse)})`
    }
    if (ts.isPropertyAccessExpression(node)) {
      if (node.questionDotToken !== undefined) {
        // `a?.b` is `a and a.b` when `a` is an object or undefined (never false), as for `??`.
        if (!ts.isIdentifier(node.expression)) fail(node, 'a ?. on anything but a local')
        const owner = expression(node.expression)
        return `(${owner} and ${owner}.${node.name.text})`
      }
      if (ts.isOptionalChain(node)) fail(node, 'a field of an optional chain')
      if (node.name.text === 'length') return `#${operandOf(node.expression, 8, false)}`
      return `${expression(node.expression)}.${node.name.text}`
    }
    if (ts.isElementAccessExpression(node)) {
      if (ts.isOptionalChain(node)) fail(node, 'an optional chain')
      const index = node.argumentExpression
      // The registry by name (core/algorithms/index.ts): prelude.lua's ALGORITHMS, keyed by the same names.
      if (ts.isIdentifier(node.expression) && node.expression.text === REGISTRY) return `ALGORITHMS[${expression(index)}]`
      if (ts.isIdentifier(index) && oneBased.has(index.text)) return `${expression(node.expression)}[${index.text}]`
      return `${expression(node.expression)}[${plusOne(index)}]`
    }
    if (ts.isCallExpression(node)) return call(node)
    if (ts.isArrayLiteralExpression(node)) return `{${node.elements.map(expression).join(', ')}}`
    if (ts.isObjectLiteralExpression(node)) {
      const fields = node.properties.map((property) => {
        if (!ts.isPropertyAssignment(property) || !ts.isIdentifier(property.name))
          fail(property, 'an object field other than `name: value`')
        return `${property.name.text} = ${expression(property.initializer)}`
      })
      return fields.length === 0 ? '{}' : `{ ${fields.join(', ')} }`
    }
    fail(node, `the expression ${ts.SyntaxKind[node.kind]}`)
  }

  // A binary operand, in parentheses where Lua would group it otherwise.
  function operandOf(node, precedence, right) {
    const text = expression(node)
    if (!ts.isBinaryExpression(node)) return text
    const inner = PRECEDENCE[OPERATORS[node.operatorToken.kind]]
    return inner < precedence || (right && inner === precedence) ? `(${text})` : text
  }

  // A 0-based index as Lua's 1-based one, folded into a constant term where there is one.
  function plusOne(node) {
    if (ts.isNumericLiteral(node)) return String(Number(node.text) + 1)
    if (ts.isBinaryExpression(node) && ts.isNumericLiteral(node.right)) {
      const k = Number(node.right.text)
      const left = operandOf(node.left, 5, false)
      if (node.operatorToken.kind === ts.SyntaxKind.PlusToken) return `${left} + ${k + 1}`
      if (node.operatorToken.kind === ts.SyntaxKind.MinusToken) return k === 1 ? left : `${left} - ${k - 1}`
    }
    return `${operandOf(node, 5, false)} + 1`
  }

  function call(node) {
    const callee = node.expression
    const args = () => node.arguments.map(expression).join(', ')
    if (ts.isPropertyAccessExpression(callee) && ts.isIdentifier(callee.expression)) {
      const owner = callee.expression.text
      const member = callee.name.text
      if (owner === 'Math') {
        if (!MATH.has(member)) fail(node, `Math.${member}`)
        return `${member}(${args()})`
      }
      if (objects.has(owner)) {
        if (!(member in METHODS)) fail(node, `the algorithm method ${member}`)
        return `ALGORITHMS['${objects.get(owner)}'].${METHODS[member]}(${args()})`
      }
    }
    // An algorithm's method on an algorithm taken from the registry (the subset has no other
    // objects with methods): `algorithm.ttlMs(…)`, `ALGORITHM_BY_NAME[name].step(…)`.
    if (ts.isPropertyAccessExpression(callee) && Object.hasOwn(METHODS, callee.name.text) && !ts.isOptionalChain(callee)) {
      const owner = callee.expression
      const local = ts.isIdentifier(owner) && owner.text !== 'Math' && !objects.has(owner.text)
      const fromRegistry = ts.isElementAccessExpression(owner) && ts.isIdentifier(owner.expression) && owner.expression.text === REGISTRY
      if (local || fromRegistry) return `${expression(owner)}.${METHODS[callee.name.text]}(${args()})`
    }
    if (ts.isIdentifier(callee) && PRELUDE.has(callee.text)) return `${callee.text}(${args()})`
    if (ts.isIdentifier(callee) && functions.has(callee.text)) return `${luaName(callee.text)}(${args()})`
    fail(node, `a call of ${callee.getText()}`)
  }

  function minusOne(node) {
    if (ts.isNumericLiteral(node)) return String(Number(node.text) - 1)
    if (ts.isBinaryExpression(node) && ts.isNumericLiteral(node.right) && node.operatorToken.kind === ts.SyntaxKind.MinusToken) {
      return `${operandOf(node.left, 5, false)} - ${Number(node.right.text) + 1}`
    }
    return `${operandOf(node, 5, false)} - 1`
  }

  return { expression, operandOf, plusOne, minusOne, call, oneBased }
}
