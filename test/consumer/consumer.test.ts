// The packages as a new user gets them: `npm pack` both workspaces, install the tarballs into a
// throwaway app next to the current release of every peer from the registry, and run the README's
// and the docs' code there: each framework, RedisStore on the app's own clients, the installed
// `floodgate` command, and every TypeScript snippet of the docs under two module resolutions.

import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { execFile, spawn } from 'node:child_process'
import { cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { freePort, startRedis, type RedisProcess } from '../../packages/floodgate/test/support/redis-server.js'
import { startMemcached, type MemcachedProcess } from '../../packages/floodgate/test/support/memcached-server.js'
import { ALGORITHMS } from '../../packages/floodgate/src/core/policy.js'
import { extractSnippets } from './snippets.js'
import { deadLinks } from './links.js'

const run = promisify(execFile)
/** The checkout (not the test runner's compiled copy of it, scripts/compile-tests.mjs), packed as a user gets it. */
const ROOT = process.env.FLOODGATE_REPOSITORY ?? join(import.meta.dirname, '../..')
/**
 * Over express alone, what an Express app may gain by adding the library (issue 28): the library
 * itself and nothing else (yaml, for rules files only, is an optional peer), 2 MB apparent with
 * its docs, images and API reference.
 */
const MAX_ADDED_PACKAGES = 1
const MAX_ADDED_BYTES = 2_000_000
/** Peers installed at whatever version the registry calls latest today. */
const PEERS = ['fastify', 'koa', 'hono', '@hono/node-server', 'ioredis', 'redis']
const TYPES = ['typescript', '@types/node', '@types/express', '@types/koa']
const DOCS = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
]

async function npm(cwd: string, ...args: string[]): Promise<string> {
  const { stdout } = await run('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], { cwd, maxBuffer: 64 << 20 })
  return stdout
}

/** Packages installed under node_modules (each path npm lists once, nested copies included). */
async function installed(app: string): Promise<{ packages: number; bytes: number }> {
  const { stdout } = await run('npm', ['ls', '--all', '--parseable'], { cwd: app, maxBuffer: 64 << 20 }).catch((error) => error)
  const paths = String(stdout).trim().split('\n').slice(1)
  const { stdout: du } = await run('du', ['-sb', join(app, 'node_modules')])
  return { packages: paths.length, bytes: Number(du.split('\t')[0]) }
}

function node(app: string, file: string, env: NodeJS.ProcessEnv = {}): Promise<{ stdout: string; stderr: string }> {
  return run(process.execPath, [file], { cwd: app, env: { ...process.env, ...env }, timeout: 30_000 })
}

// A bound on a hang (npm's installs on a loaded machine can take many minutes), as the runner's own.
describe('the packed packages in a new app', { timeout: 1_800_000 }, () => {
  let work: string
  let app: string
  let tarballs: { library: string; server: string }
  let added: { packages: number; bytes: number }
  let redis: RedisProcess
  let memcached: MemcachedProcess

  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'floodgate-consumer-'))
    // Two apps: `bare` is an Express app that then adds the library alone (what the library costs
    // it), and `app` is one with every peer that adds both packages (where the code runs). The pack
    // (which builds both packages) and the installs that need no tarball run at once.
    const bare = join(work, 'bare')
    app = join(work, 'app')
    for (const dir of [bare, app]) {
      mkdirSync(dir)
      writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'consumer-app', private: true, type: 'module' }))
    }
    const [packed, alone] = await Promise.all([
      npm(ROOT, 'pack', '--workspaces', '--pack-destination', work, '--silent'),
      npm(bare, 'install', 'express').then(() => installed(bare)),
      npm(app, 'install', 'express', ...PEERS, ...TYPES),
    ])
    const files = packed
      .trim()
      .split('\n')
      .map((line) => join(work, line.trim()))
    tarballs = {
      library: files.find((file) => /\/floodgate-\d/.test(file))!,
      server: files.find((file) => /\/floodgate-server-\d/.test(file))!,
    }
    const [withLibrary] = await Promise.all([
      npm(bare, 'install', tarballs.library).then(() => installed(bare)),
      npm(app, 'install', tarballs.library, tarballs.server),
    ])
    added = { packages: withLibrary.packages - alone.packages, bytes: withLibrary.bytes - alone.bytes }
    cpSync(join(import.meta.dirname, 'apps'), app, { recursive: true })
    redis = await startRedis()
    memcached = await startMemcached()
  })

  after(async () => {
    await redis?.stop()
    await memcached?.stop()
    if (work) rmSync(work, { recursive: true, force: true })
  })

  it(`adds at most ${MAX_ADDED_PACKAGES} package and 2 MB to an Express app`, (t) => {
    t.diagnostic(`the library added ${added.packages} package(s) and ${added.bytes} bytes (du -sb) to an Express app`)
    assert.ok(added.packages <= MAX_ADDED_PACKAGES, `added ${added.packages} packages`)
    assert.ok(added.bytes <= MAX_ADDED_BYTES, `added ${(added.bytes / 1e6).toFixed(2)} MB`)
  })

  it('reads rules files only with yaml, and says to install it when the app has none', async () => {
    // `bare` has express and the library alone: the optional yaml peer is not there.
    const bare = join(work, 'bare')
    assert.throws(() => readFileSync(join(bare, 'node_modules/yaml/package.json')), 'yaml is not installed with the library')
    writeFileSync(join(bare, 'rules.yaml'), 'domain: edge\ndescriptors:\n  - key: user\n')
    writeFileSync(
      join(bare, 'rules.mjs'),
      "import { loadRules } from 'floodgate/rules'\n" +
        "try { loadRules('rules.yaml'); console.log('loaded') } catch (error) { console.log(error.code, error.message) }\n",
    )
    const { stdout } = await node(bare, 'rules.mjs')
    assert.match(stdout, /^INVALID_OPTION .*npm i yaml/)
  })

  it('ships every file and heading the Markdown of the package links', () => {
    const dead = deadLinks(join(app, 'node_modules/floodgate'))
    assert.deepEqual(dead, [], `dead links in the installed package:\n${dead.join('\n')}`)
    const api = readFileSync(join(app, 'node_modules/floodgate/docs/api/README.md'), 'utf8')
    assert.match(api, /floodgate\/express/, 'the API reference is shipped')
  })

  it('ships LICENSE, README and the docs its links point to, and no sources', async () => {
    const listing = (await run('tar', ['-tzf', tarballs.library])).stdout
    for (const file of [
      'package/LICENSE',
      'package/README.md',
      'package/docs/middleware.md',
      'package/dist/stores/redis/scripts/runner.lua',
      // Build output (scripts/gen-algorithms.mjs in the library's build), in no commit.
      ...ALGORITHMS.map((name) => `package/dist/stores/redis/scripts/${name}.lua`),
      'package/dist/stores/memory/kernels/index.js',
    ]) {
      assert.ok(listing.includes(file), `${file} in the library tarball`)
    }
    assert.doesNotMatch(listing, /package\/src\//)
    const readme = readFileSync(join(app, 'node_modules/floodgate/README.md'), 'utf8')
    for (const [, target] of readme.matchAll(/\]\(((?!https?:|#)[^)#]+)/g)) {
      assert.doesNotThrow(() => readFileSync(join(app, 'node_modules/floodgate', target)), `README link ${target} resolves in the package`)
    }
  })

  for (const scenario of ['express', 'fastify-awaited', 'fastify-not-awaited', 'koa', 'hono', 'node-http']) {
    it(`limits in ${scenario}`, async () => {
      await node(app, `${scenario}.mjs`)
    })
  }

  for (const client of ['ioredis', 'node-redis']) {
    it(`RedisStore takes the app's own ${client} client`, async () => {
      await node(app, `redis-${client}.mjs`, { REDIS_URL: redis.url })
    })
  }

  it("MemcachedStore takes the app's memjs (floodgate-server brings it; for the library it is an optional peer)", async () => {
    await node(app, 'memcached-memjs.mjs', { MEMCACHED_ADDRESS: memcached.address })
  })

  it('runs the installed floodgate command: --version, then serve and answer', async () => {
    const version = JSON.parse(readFileSync(join(ROOT, 'packages/floodgate-server/package.json'), 'utf8')).version
    const { stdout } = await run('npx', ['--no-install', 'floodgate', '--version'], { cwd: app })
    assert.match(stdout, new RegExp(version.replaceAll('.', '\\.')))
    const [httpPort, grpcPort] = [await freePort(), await freePort()]
    cpSync(join(ROOT, 'examples/rules.yaml'), join(app, 'rules.yaml'))
    const args = [
      'floodgate',
      'serve',
      '--config',
      'rules.yaml',
      '--host',
      '127.0.0.1',
      '--http-port',
      `${httpPort}`,
      '--grpc-port',
      `${grpcPort}`,
    ]
    const service = spawn(join(app, 'node_modules/.bin/floodgate'), args.slice(1), { cwd: app, stdio: ['ignore', 'ignore', 'pipe'] })
    try {
      let answer: Response | undefined
      // Until it answers, and while it answers 503 (still starting): wait for that state, not a time.
      for (let attempt = 0; attempt < 200 && (answer === undefined || answer.status === 503); attempt++) {
        if (answer !== undefined) await new Promise((resolve) => setTimeout(resolve, 100))
        answer = await fetch(`http://127.0.0.1:${httpPort}/v1/check`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ domain: 'edge', descriptors: [[{ key: 'remote_address', value: '203.0.113.7' }]] }),
        }).catch(() => new Promise<undefined>((resolve) => setTimeout(resolve, 100)))
      }
      assert.equal(answer?.status, 200)
      assert.equal(((await answer!.json()) as { allowed: boolean }).allowed, true)
    } finally {
      service.kill('SIGTERM')
    }
  })

  it("type-checks every entry point's declarations, none of them missing a file the build pruned", async () => {
    // skipLibCheck off, unlike the snippets: an import of a pruned declaration (scripts/prune-declarations.mjs)
    // would be an error here. Errors in other packages' types (@types/koa's own) are theirs, not ours.
    const dir = join(app, 'declarations')
    mkdirSync(dir)
    const manifest = JSON.parse(readFileSync(join(app, 'node_modules/floodgate/package.json'), 'utf8'))
    const specifiers = Object.keys(manifest.exports).filter((key) => key !== './package.json')
    const source = specifiers.map((key, i) => `export * as entry${i} from '${join('floodgate', key)}'`).join('\n')
    writeFileSync(join(dir, 'entries.ts'), `${source}\n`)
    const config = {
      compilerOptions: { module: 'node16', moduleResolution: 'node16', target: 'es2022', strict: true, noEmit: true, types: ['node'] },
      files: ['entries.ts'],
    }
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify(config))
    const compiled = await run(join(app, 'node_modules/.bin/tsc'), ['-p', dir], { cwd: dir }).catch((error) => error)
    const ours = String(compiled.stdout ?? '')
      .split('\n')
      .filter((line) => line.includes('node_modules/floodgate/') || line.startsWith('entries.ts'))
    assert.deepEqual(ours, [], `tsc found errors in the package's declarations:\n${compiled.stdout}`)
    assert.ok(specifiers.length >= 8, `entry points: ${specifiers.join(', ')}`)
  })

  for (const resolution of ['node16', 'bundler'] as const) {
    it(`compiles every TypeScript snippet of the docs with moduleResolution ${resolution}`, async () => {
      const dir = join(app, `snippets-${resolution}`)
      mkdirSync(dir)
      const snippets = DOCS.flatMap((doc) => extractSnippets(readFileSync(join(ROOT, doc), 'utf8'), doc))
      assert.ok(snippets.length >= 10, `found ${snippets.length} snippets`)
      const names = snippets.map((snippet, i) => {
        const name = `${i}-${snippet.doc.replaceAll('/', '-').replace('.md', '')}-line-${snippet.line}.ts`
        writeFileSync(join(dir, name), snippet.code)
        return name
      })
      const module = resolution === 'node16' ? 'node16' : 'esnext'
      const config = {
        compilerOptions: {
          module,
          moduleResolution: resolution,
          target: 'es2022',
          strict: true,
          noEmit: true,
          types: ['node'],
          skipLibCheck: true,
        },
        files: names,
      }
      writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify(config))
      const compiled = await run(join(app, 'node_modules/.bin/tsc'), ['-p', dir], { cwd: dir }).catch((error) => error)
      assert.equal(compiled.code ?? 0, 0, `tsc found errors in doc snippets:\n${compiled.stdout}`)
    })
  }
})
