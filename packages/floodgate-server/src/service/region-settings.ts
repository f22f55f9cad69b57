// Region settings of `floodgate serve`: --peer values and the --regions-file YAML (docs/regions.md).

import { readFileSync } from 'node:fs'
import { parse as parseYaml } from 'yaml'
import { z } from 'zod'
import { FloodgateError, parseDuration } from 'floodgate'

/** Several regions limiting together: this one's name, every other region's Redis, the sync interval. */
export interface RegionSettings {
  region: string
  /** Peer region name → its Redis URL. */
  peers: Record<string, string>
  intervalMs: number
}

/** A region's name: what RegionSync accepts. */
export const REGION_NAME = /^[A-Za-z0-9._-]{1,64}$/

/** `NAME=redis://host:port` → [name, url] (one `--peer`). */
export const peerEntry = z.string().transform((item, ctx): [string, string] => {
  const match = /^([^=]+)=(rediss?:\/\/.+)$/.exec(item)
  if (!match || !REGION_NAME.test(match[1])) {
    const message = `expected NAME=redis://host:port (a region name, then its Redis URL), got ${JSON.stringify(item)}`
    ctx.addIssue({ code: 'custom', message })
    return z.NEVER
  }
  return [match[1], match[2]]
})

const regionsFileSchema = z
  .object({
    region: z.string().regex(REGION_NAME, "expected a region name: letters, digits, '.', '_' or '-'"),
    peers: z.record(
      z.string().regex(REGION_NAME, 'expected a region name'),
      z.string().regex(/^rediss?:\/\//, 'expected a redis:// or rediss:// URL'),
    ),
    interval: z.union([z.string(), z.number()]).optional(),
  })
  .strict()

/** Reads a regions YAML file (`region: eu`, `peers: { us: redis://… }`, `interval: 100ms`); errors name the file and field. */
export function readRegionsFile(path: string): RegionSettings {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (error) {
    throw new FloodgateError('INVALID_OPTION', `--regions-file / FLOODGATE_REGIONS_FILE: cannot read ${path}: ${(error as Error).message}`)
  }
  const parsed = regionsFileSchema.safeParse(parseYaml(text))
  if (!parsed.success) {
    const issue = parsed.error.issues[0]
    throw new FloodgateError('INVALID_OPTION', `${path}: ${issue.path.join('.') || 'file'}: ${issue.message}`)
  }
  const { region, peers, interval } = parsed.data
  if (region in peers) {
    throw new FloodgateError('INVALID_OPTION', `${path}: peers.${region}: is this region itself; list only the other regions`)
  }
  let intervalMs = 100
  try {
    if (interval !== undefined) intervalMs = parseDuration(interval, 'interval')
  } catch (error) {
    throw new FloodgateError('INVALID_OPTION', `${path}: ${(error as Error).message}`)
  }
  return { region, peers, intervalMs }
}
