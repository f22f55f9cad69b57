#!/usr/bin/env node
// The `floodgate` command: runs the built dist/cli.js of an installed package, or, in a git checkout
// (where src/ is present; the package ships only dist/), the TypeScript sources through tsx, so that
// a stale dist/ left by an earlier build is never what runs there.

import { existsSync } from 'node:fs'
import { register } from 'node:module'

const source = new URL('../src/cli.ts', import.meta.url)
let cli
if (!existsSync(source)) {
  cli = await import(new URL('../dist/cli.js', import.meta.url).href)
} else {
  // tsx is a dev dependency: present in a checkout, where dist/ has not been built.
  const { register: registerTsx } = await import('tsx/esm/api')
  registerTsx()
  // As `node --conditions=floodgate-source` would: the workspace packages export their src/ under it.
  register(
    'data:text/javascript,export function resolve(specifier, context, next) {' +
      'return next(specifier, { ...context, conditions: [...context.conditions, "floodgate-source"] }) }',
  )
  cli = await import(source.href)
}
process.exit(await cli.main(process.argv.slice(2)))
