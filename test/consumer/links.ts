// Finds the dead links of Markdown documents as they are shipped: every relative link and image
// (`[text](target)`, `![alt](target)`) must name a file inside the package, and a `#fragment` a
// heading of that file (GitHub's anchors: lower case, punctuation dropped, spaces as dashes) or an
// `<a id>` in it.

import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve, sep } from 'node:path'

/** Every `.md` file under `dir`, recursively. */
export function markdownFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    if (name === 'node_modules') return []
    if (statSync(path).isDirectory()) return markdownFiles(path)
    return name.endsWith('.md') ? [path] : []
  })
}

/** The anchors GitHub gives the headings of a Markdown text (repeats get `-1`, `-2`, …). */
export function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>()
  const seen = new Map<string, number>()
  let fenced = false
  for (const line of markdown.split('\n')) {
    if (line.trimStart().startsWith('```')) fenced = !fenced
    // Explicit anchors, as the API reference writes them (TypeDoc's `useHTMLAnchors`).
    if (!fenced) for (const [, id] of line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) anchors.add(id)
    const heading = fenced ? null : /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)
    if (heading === null) continue
    const text = heading[1]
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .replace(/<[^>]+>/g, '')
      .replace(/\\(.)/g, '$1')
    const slug = text
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\p{M}\s_-]/gu, '')
      .replace(/\s/g, '-')
    const count = seen.get(slug) ?? 0
    seen.set(slug, count + 1)
    anchors.add(count === 0 ? slug : `${slug}-${count}`)
  }
  return anchors
}

/** Links of one document outside code: `[text](target)` and `![alt](target)`, with their targets. */
function linksOf(markdown: string): string[] {
  const prose = markdown.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '')
  return [...prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((match) => match[1])
}

/** "file: link — why" for every link of the Markdown files under `root` that leads nowhere in `root`. */
export function deadLinks(root: string): string[] {
  const dead: string[] = []
  const anchors = new Map<string, Set<string>>()
  const anchorsIn = (file: string) => {
    let set = anchors.get(file)
    if (set === undefined) anchors.set(file, (set = anchorsOf(readFileSync(file, 'utf8'))))
    return set
  }
  for (const file of markdownFiles(root)) {
    for (const link of linksOf(readFileSync(file, 'utf8'))) {
      if (/^[a-z][a-z+.-]*:/i.test(link)) continue // https:, mailto:
      const [path, fragment] = link.split('#', 2)
      const target = path === '' ? file : resolve(dirname(file), decodeURIComponent(path))
      const where = `${relative(root, file)}: ${link}`
      if (target !== root && !target.startsWith(root + sep)) dead.push(`${where} — leaves the package`)
      else if (!existsSync(target)) dead.push(`${where} — no such file in the package`)
      else if (fragment !== undefined && target.endsWith('.md') && !anchorsIn(target).has(fragment))
        dead.push(`${where} — no heading #${fragment} there`)
    }
  }
  return dead
}
