// Readers of single setting values (ports, durations, host:port lists, counts, header names) for settings-schema.ts.

import { z } from 'zod'
import { parseDuration } from 'floodgate'
import type { HostPort } from './settings-types.js'

/** Whole number ≥ 1, or the default when absent. */
export const count = (fallback: number) =>
  z
    .string()
    .regex(/^[1-9]\d*$/, 'expected a whole number ≥ 1')
    .transform(Number)
    .refine(Number.isSafeInteger, 'too large')
    .optional()
    .transform((n) => n ?? fallback)

export const port = (fallback: number) =>
  z
    .string()
    .regex(/^\d+$/, 'expected a port number')
    .transform(Number)
    .refine((n) => n <= 65_535, 'a port is at most 65535')
    .optional()
    .transform((n) => n ?? fallback)

export const hostPortList = z
  .string()
  .transform((list, ctx) => {
    const nodes: HostPort[] = []
    for (const item of list
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)) {
      const match = /^(.+):(\d{1,5})$/.exec(item)
      if (!match) {
        ctx.addIssue({ code: 'custom', message: `expected host:port, got ${JSON.stringify(item)}` })
        return z.NEVER
      }
      nodes.push({ host: match[1].replace(/^\[(.*)\]$/, '$1'), port: Number(match[2]) })
    }
    if (nodes.length === 0) {
      ctx.addIssue({ code: 'custom', message: 'give at least one host:port' })
      return z.NEVER
    }
    return nodes
  })
  .optional()

/** A duration flag in ms (`250ms`, `5s`, or bare milliseconds), or undefined when absent. */
export const optionalDurationMs = z
  .string()
  .optional()
  .transform((value, ctx) => {
    if (value === undefined) return undefined
    try {
      return parseDuration(/^\d+$/.test(value) ? Number(value) : value)
    } catch (error) {
      ctx.addIssue({ code: 'custom', message: (error as Error).message.replace(/^duration: /, '') })
      return z.NEVER
    }
  })

/** A duration flag in ms, or the default when absent. */
export const durationMs = (fallback: number) => optionalDurationMs.transform((ms) => ms ?? fallback)

// Node's timers hold at most 2^31-1 ms (about 24.8 days); beyond that a timer fires at once.
const MAX_TIMER_MS = 2 ** 31 - 1

/** A duration that a Node timer can wait for (at most 2^31-1 ms), or the default when absent. */
export const timerMs = (fallback: number) => durationMs(fallback).refine((ms) => ms <= MAX_TIMER_MS, 'at most 24d (2147483647 ms)')

// --- Envoy drop-in: value readers of its settings ---
export const headerName = (fallback: string) =>
  z
    .string()
    .regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, 'expected an HTTP header name (letters, digits, - and the like)')
    .optional()
    .transform((name) => name ?? fallback)

export const wholeNumber = (fallback: number) =>
  z
    .string()
    .regex(/^[1-9]\d*$/, 'expected a whole number ≥ 1')
    .transform(Number)
    .optional()
    .transform((n) => n ?? fallback)
