// Finds the TypeScript code blocks of a Markdown document: every block fenced as ```ts is a
// snippet a reader may paste into a file of their own, so each must compile alone.

export interface Snippet {
  readonly doc: string
  /** 1-based line of the opening fence. */
  readonly line: number
  readonly code: string
}

export function extractSnippets(markdown: string, doc: string): Snippet[] {
  const snippets: Snippet[] = []
  const lines = markdown.split('\n')
  for (let i = 0; i < lines.length; i++) {
    if (lines[i].trim() !== '```ts') continue
    const start = i
    const code: string[] = []
    for (i++; i < lines.length && lines[i].trim() !== '```'; i++) code.push(lines[i])
    // `export {}` keeps a snippet without imports a module of its own, so names never clash.
    snippets.push({ doc, line: start + 1, code: `${code.join('\n')}\nexport {}\n` })
  }
  return snippets
}
