// Headless Chromium for the dashboard tests: Debian's binary driven by playwright-core, a fresh
// profile, no sandbox (CI runs as root), nothing reaching out to the network.

import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chromium, type BrowserContext } from 'playwright-core'

export const CHROMIUM = '/usr/bin/chromium'
// In the checkout, not in the test runner's compiled copy of it, which the next run replaces.
export const ARTIFACTS = join(process.env.FLOODGATE_REPOSITORY ?? join(import.meta.dirname, '../../../..'), 'test-artifacts')

export interface Browser {
  context: BrowserContext
  close(): Promise<void>
}

/** Launches Chromium with basic-auth credentials for the dashboard. */
export async function launchChromium(
  credentials: { username: string; password: string },
  viewport = { width: 1280, height: 1100 },
): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (.ci/run installs it)`)
  const profile = mkdtempSync(join(tmpdir(), 'floodgate-chromium-'))
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    httpCredentials: credentials,
    viewport,
  })
  return {
    context,
    async close() {
      await context.close()
      rmSync(profile, { recursive: true, force: true })
    },
  }
}

/** Polls `check` until it holds (generous bound, no elapsed-time assertion). */
export async function until<T>(what: string, check: () => Promise<T | undefined>, attempts = 120): Promise<T> {
  for (let i = 0; i < attempts; i++) {
    const value = await check()
    if (value !== undefined) return value
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
  throw new Error(`timed out waiting for ${what}`)
}
