#!/usr/bin/env node
// The `floodgate` command: runs the built dist/cli.js, or the TypeScript sources through tsx when dist/ is absent (a git checkout).

import { existsSync } from 'node:fs'

const built = new URL('../dist/cli.js', import.meta.url)
let cli
if (existsSync(built)) {
  cli = await import(built.href)
} else {
  // tsx is a dev dependency: present in a checkout, where dist/ has not been built.
  const { register } = await import('tsx/esm/api')
  register()
  cli = await import(new URL('../src/cli.ts', import.meta.url).href)
}
process.exit(await cli.main(process.argv.slice(2)))
